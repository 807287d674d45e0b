"""What a twinned tab shows of reality: each turn's record read for display, the line under
a twinned turn, and the view of prediction and reality side by side or as a diff."""
