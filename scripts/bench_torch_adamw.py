#!/usr/bin/env python3
"""bench_torch_adamw.py — PyTorch's CPU AdamW on one fp32 tensor of N parameters, for
`zerolab bench adam` to compare its fused kernel with: torch.optim.AdamW with foreach=False
(the single-tensor path) and foreach=True, torch.set_num_threads(T), the median ms per step()
over R timed steps after one warm-up step. Prints one JSON object; when torch cannot be imported
it prints {"torch": null, "reason": ...} and exits 0, so the caller can say so and go on.

    python3 scripts/bench_torch_adamw.py --params 50000000 --threads 2 --repeats 10
"""
import argparse
import json
import statistics
import sys
import time


def time_adamw(torch, params, threads, repeats, foreach):
    """Median ms of optimizer.step() on a fresh parameter, gradient and optimizer state."""
    torch.set_num_threads(threads)
    generator = torch.Generator().manual_seed(0)
    param = torch.nn.Parameter(torch.randn(params, generator=generator) * 1e-3)
    param.grad = torch.randn(params, generator=generator) * 1e-5
    optimizer = torch.optim.AdamW([param], lr=1e-3, betas=(0.9, 0.999), eps=1e-8,
                                  weight_decay=0.01, foreach=foreach)
    optimizer.step()  # warm-up: allocates exp_avg and exp_avg_sq
    samples_ms = []
    for _ in range(repeats):
        start = time.perf_counter()
        optimizer.step()
        samples_ms.append((time.perf_counter() - start) * 1e3)
    return statistics.median(samples_ms)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--params", type=int, default=50_000_000)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=10)
    args = parser.parse_args()
    try:
        import torch
    except ImportError as error:
        print(json.dumps({"torch": None, "reason": f"cannot import torch: {error}"}))
        return 0
    result = {"torch": torch.__version__, "params": args.params, "threads": args.threads,
              "repeats": args.repeats}
    result["single_tensor_ms"] = time_adamw(torch, args.params, args.threads, args.repeats, False)
    result["foreach_ms"] = time_adamw(torch, args.params, args.threads, args.repeats, True)
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
