"""xllamacpp's HTTP server (llama.cpp's server, in a Python process of its own) for the
benchmarks: it prints its address, serves until its standard input closes, then stops.

    python bench/xllama_server.py MODEL.gguf --slots 4 --threads 2 --ctx 4096
"""

from __future__ import annotations

import argparse
import sys


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("model")
    parser.add_argument("--slots", type=int, default=4)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--ctx", type=int, default=4096, help="context of each slot")
    parser.add_argument("--gpu-layers", type=int, default=0)
    args = parser.parse_args()
    import xllamacpp

    params = xllamacpp.CommonParams()
    params.model.path = args.model
    params.n_parallel = args.slots
    params.n_ctx = args.ctx * args.slots
    params.kv_unified = False
    params.n_gpu_layers = args.gpu_layers
    params.cpuparams.n_threads = args.threads
    params.cpuparams_batch.n_threads = args.threads
    params.hostnames = ["127.0.0.1"]
    params.port = 0
    params.warmup = False
    params.verbosity = 0
    server = xllamacpp.Server(params)
    print(f"{server.listening_address}/v1", flush=True)
    sys.stdin.read()
    del server
    return 0


if __name__ == "__main__":
    sys.exit(main())
