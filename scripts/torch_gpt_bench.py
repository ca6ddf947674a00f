#!/usr/bin/env python3
"""torch_gpt_bench.py — the PyTorch eager row beside `zerolab train --backend nccl`: GPT-2 124M
(a nanoGPT-style model written here, the LM head tied to wte) trained on one GPU (W = 1) with
bf16 autocast (or fp16 with `--dtype float16`) and torch.optim.AdamW(fused=True), on random tokens
(no downloads).

Per step: zero_grad, forward under torch.autocast(bfloat16 or float16) (parameters, gradients and
Adam state stay fp32), cross-entropy, backward, optimizer step, between two CUDA events; in fp16
the loss is scaled for backward and the step unscaled by torch.amp.GradScaler (dynamic scaling, a
step with an overflow skipped), as PyTorch's mixed-precision recipe runs it. W untimed steps,
then R timed ones; the median is reported. Peak memory is torch.cuda.max_memory_allocated over the
timed steps, split into the bytes of the parameters, the gradients and the optimizer state
(summed over the tensors) and the rest (activations, autocast copies, workspace).

MFU = FLOPs per token x tokens/s / peak FLOP/s, with FLOPs per token 6N + 6·L·C·T (N every
parameter, wte counted once; L layers, C channels, T the sequence length: the matmuls forward and
backward, and causal attention's QK^T and AV, half of the 12·L·C·T that nanoGPT and PaLM count for
unmasked attention). The peak defaults to 989e12, the H100 SXM's dense bf16 rate. Prints one JSON
object.

    python3 scripts/torch_gpt_bench.py --micro-batch 8 --seq-len 1024 --steps 20 --warmup 5
"""
import argparse
import json
import math
import statistics
import sys

H100_SXM_DENSE_BF16_FLOPS = 989e12


def flops_per_token(params, n_layer, n_embd, seq_len):
    """6N + 6·L·C·T: training FLOPs per token with causal attention (see the module docstring)."""
    return 6 * params + 6 * n_layer * n_embd * seq_len


def build_model(torch, n_layer, n_head, n_embd, block_size, vocab, attention):
    """GPT-2 as nanoGPT writes it: pre-LayerNorm blocks, tanh GELU, biases, tied LM head."""
    nn = torch.nn
    functional = torch.nn.functional

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln_1 = nn.LayerNorm(n_embd)
            self.c_attn = nn.Linear(n_embd, 3 * n_embd)
            self.attn_proj = nn.Linear(n_embd, n_embd)
            self.ln_2 = nn.LayerNorm(n_embd)
            self.c_fc = nn.Linear(n_embd, 4 * n_embd)
            self.mlp_proj = nn.Linear(4 * n_embd, n_embd)

        def attend(self, x):
            b, t, c = x.shape  # x is (B, T, C)
            q, k, v = self.c_attn(x).split(n_embd, dim=2)
            # each (B, heads, T, C / heads)
            q, k, v = (z.view(b, t, n_head, c // n_head).transpose(1, 2) for z in (q, k, v))
            if attention == "sdpa":
                y = functional.scaled_dot_product_attention(q, k, v, is_causal=True)
            else:  # the scores materialised, as zerolab's attention kernel does
                scores = (q @ k.transpose(-2, -1)) / math.sqrt(c // n_head)  # (B, heads, T, T)
                mask = torch.ones(t, t, dtype=torch.bool, device=x.device).tril()
                y = scores.masked_fill(~mask, float("-inf")).softmax(dim=-1) @ v
            return self.attn_proj(y.transpose(1, 2).contiguous().view(b, t, c))

        def forward(self, x):
            x = x + self.attend(self.ln_1(x))
            return x + self.mlp_proj(functional.gelu(self.c_fc(self.ln_2(x)), approximate="tanh"))

    class Gpt(nn.Module):
        def __init__(self):
            super().__init__()
            self.wte = nn.Embedding(vocab, n_embd)
            self.wpe = nn.Embedding(block_size, n_embd)
            self.h = nn.ModuleList(Block() for _ in range(n_layer))
            self.ln_f = nn.LayerNorm(n_embd)
            for module in self.modules():
                if isinstance(module, (nn.Linear, nn.Embedding)):
                    nn.init.normal_(module.weight, std=0.02)
                if isinstance(module, nn.Linear):
                    nn.init.zeros_(module.bias)

        def forward(self, tokens):
            positions = torch.arange(tokens.shape[1], device=tokens.device)
            x = self.wte(tokens) + self.wpe(positions)  # (B, T, C)
            for block in self.h:
                x = block(x)
            return self.ln_f(x) @ self.wte.weight.t()  # tied LM head: (B, T, V)

    return Gpt()


def tensor_bytes(tensors):
    return sum(t.numel() * t.element_size() for t in tensors)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--micro-batch", type=int, default=8, help="sequences per step, B")
    parser.add_argument("--seq-len", type=int, default=1024, help="tokens per sequence, T")
    parser.add_argument("--steps", type=int, default=20, help="timed steps, R")
    parser.add_argument("--warmup", type=int, default=5, help="untimed steps first, W")
    parser.add_argument("--peak-flops", type=float, default=H100_SXM_DENSE_BF16_FLOPS,
                        help="the GPU's peak bf16 FLOP/s (default: H100 SXM, dense)")
    parser.add_argument("--attention", choices=["sdpa", "math"], default="sdpa",
                        help="sdpa: torch's fused causal attention, as nanoGPT | math: the "
                             "scores materialised, as zerolab does")
    parser.add_argument("--dtype", choices=["bfloat16", "float16"], default="bfloat16",
                        help="autocast's format (float16 adds torch.amp.GradScaler)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    import torch

    if not torch.cuda.is_available():
        sys.exit(f"torch_gpt_bench.py: torch {torch.__version__} sees no CUDA GPU: run it on a "
                 "GPU machine")
    n_layer, n_head, n_embd, block_size, vocab = 12, 12, 768, 1024, 50257  # the 124M preset
    if args.seq_len > block_size:
        sys.exit(f"torch_gpt_bench.py: --seq-len {args.seq_len} is above the context {block_size}")
    torch.manual_seed(args.seed)
    device = torch.device("cuda", 0)
    model = build_model(torch, n_layer, n_head, n_embd, block_size, vocab, args.attention)
    model = model.to(device)
    params = sum(p.numel() for p in model.parameters())
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3, betas=(0.9, 0.999), eps=1e-8,
                                  weight_decay=0.01, fused=True)
    data = torch.randint(0, vocab, (args.micro_batch, args.seq_len + 1), device=device)
    inputs, targets = data[:, :-1], data[:, 1:]
    autocast_dtype = getattr(torch, args.dtype)
    scaler = torch.amp.GradScaler("cuda", enabled=args.dtype == "float16")
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    step_ms, losses = [], []
    for step in range(args.warmup + args.steps):
        if step == args.warmup:
            torch.cuda.reset_peak_memory_stats(device)
        start.record()
        optimizer.zero_grad(set_to_none=True)
        with torch.autocast(device_type="cuda", dtype=autocast_dtype):
            logits = model(inputs)
        loss = torch.nn.functional.cross_entropy(logits.float().view(-1, vocab),
                                                 targets.reshape(-1))
        scaler.scale(loss).backward()  # as loss.backward() when scaling is off
        scaler.step(optimizer)
        scaler.update()
        stop.record()
        stop.synchronize()
        losses.append(loss.item())
        if step >= args.warmup:
            step_ms.append(start.elapsed_time(stop))
    ms = statistics.median(step_ms)
    tokens_per_s = args.micro_batch * args.seq_len / (ms / 1e3)
    per_token = flops_per_token(params, n_layer, n_embd, args.seq_len)
    peak_bytes = torch.cuda.max_memory_allocated(device)
    params_bytes = tensor_bytes(model.parameters())
    grads_bytes = tensor_bytes(p.grad for p in model.parameters() if p.grad is not None)
    optimizer_bytes = tensor_bytes(t for state in optimizer.state.values()
                                   for t in state.values() if torch.is_tensor(t))
    print(json.dumps({
        "framework": "torch", "torch": torch.__version__, "device": torch.cuda.get_device_name(0),
        "model": "gpt", "preset": "124M", "params": params, "world": 1,
        "precision": ("bf16 autocast" if args.dtype == "bfloat16" else
                      "fp16 autocast, GradScaler") + ", fp32 parameters, gradients and Adam state",
        "optimizer": "AdamW(fused=True)", "attention": args.attention,
        "micro_batch": args.micro_batch, "seq_len": args.seq_len, "warmup": args.warmup,
        "steps": args.steps, "step_ms": ms, "best_step_ms": min(step_ms),
        "tokens_per_s": tokens_per_s, "flops_per_token": per_token,
        "peak_flops": args.peak_flops, "mfu": per_token * tokens_per_s / args.peak_flops,
        "peak_bytes": peak_bytes,
        "peak_bytes_by_category": {"params": params_bytes, "grads": grads_bytes,
                                   "optimizer": optimizer_bytes,
                                   "other": peak_bytes - params_bytes - grads_bytes
                                   - optimizer_bytes},
        "first_loss": losses[0], "last_loss": losses[-1]}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
