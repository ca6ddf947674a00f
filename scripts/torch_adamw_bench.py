#!/usr/bin/env python3
"""torch_adamw_bench.py — PyTorch's fused CUDA AdamW on the tensor sizes `zerolab bench adam
--accelerator cuda` updates, timed the same way, for it to compare with in the same run.

torch.optim.AdamW(fused=True), lr 1e-3, betas (0.9, 0.999), eps 1e-8, weight decay 0.01 (the
zerolab defaults) on one fp32 parameter per size, on GPU 0. W untimed step()s, then R timed ones,
each between two CUDA events; each step alternates with a device-to-device copy of 14 bytes per
parameter (the copy reads and writes the 28 bytes per parameter AdamW moves). Bandwidths are
decimal GB/s: AdamW 28 bytes per parameter (read p, g, m, v; write p, m, v), the copy its bytes
read plus written. Prints one JSON object; when torch cannot be imported or sees no GPU it prints
{"torch": null, "reason": ...} and exits 0, so the caller can say so and go on.

    python3 scripts/torch_adamw_bench.py --sizes 38597376,786432,768 --warmup 3 --repeats 10
"""
import argparse
import json
import statistics
import sys

ADAM_BYTES_PER_PARAM = 28
COPY_BYTES_PER_PARAM = 14


def gbps(bytes_moved, ms):
    """Decimal GB/s of `bytes_moved` in `ms` milliseconds."""
    return bytes_moved / (ms * 1e6)


def run(torch, sizes, warmup, repeats):
    """Median and best ms of a fused AdamW step and of the copy, alternating on one stream."""
    device = torch.device("cuda", 0)
    generator = torch.Generator(device=device).manual_seed(0)
    params = []
    for elems in sizes:
        param = torch.nn.Parameter(torch.randn(elems, device=device, generator=generator) * 1e-3)
        param.grad = torch.randn(elems, device=device, generator=generator) * 1e-5
        params.append(param)
    optimizer = torch.optim.AdamW(params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8,
                                  weight_decay=0.01, fused=True)
    total = sum(sizes)
    copy_src = torch.ones(COPY_BYTES_PER_PARAM * total, dtype=torch.uint8, device=device)
    copy_dst = torch.empty_like(copy_src)
    events = [torch.cuda.Event(enable_timing=True) for _ in range(4)]
    adam_ms, copy_ms = [], []
    for r in range(warmup + repeats):
        events[0].record()
        optimizer.step()
        events[1].record()
        events[2].record()
        copy_dst.copy_(copy_src)
        events[3].record()
        events[3].synchronize()
        if r >= warmup:
            adam_ms.append(events[0].elapsed_time(events[1]))
            copy_ms.append(events[2].elapsed_time(events[3]))
    return adam_ms, copy_ms, copy_src.numel()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", required=True,
                        help="elements of each parameter tensor, comma-separated")
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--repeats", type=int, default=10)
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    try:
        import torch
    except ImportError as error:
        print(json.dumps({"torch": None, "reason": f"cannot import torch: {error}"}))
        return 0
    if not torch.cuda.is_available():
        print(json.dumps({"torch": None, "reason": f"torch {torch.__version__} sees no CUDA GPU"}))
        return 0
    adam_ms, copy_ms, copy_bytes = run(torch, sizes, args.warmup, args.repeats)
    total = sum(sizes)
    ms = statistics.median(adam_ms)
    result = {"torch": torch.__version__, "device": torch.cuda.get_device_name(0),
              "fused": True, "params": total, "tensors": len(sizes), "warmup": args.warmup,
              "repeats": args.repeats, "ms": ms, "best_ms": min(adam_ms),
              "gbps": gbps(ADAM_BYTES_PER_PARAM * total, ms),
              "best_gbps": gbps(ADAM_BYTES_PER_PARAM * total, min(adam_ms)),
              "copy_bytes": copy_bytes, "copy_ms": statistics.median(copy_ms),
              "copy_gbps": gbps(2 * copy_bytes, statistics.median(copy_ms))}
    result["copy_fraction"] = result["gbps"] / result["copy_gbps"]
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
