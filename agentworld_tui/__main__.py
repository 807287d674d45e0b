from agentworld_tui.cli import main

raise SystemExit(main())
