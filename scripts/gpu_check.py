#!/usr/bin/env python3
"""The GPU check's runner (scripts/gpu-check.sh calls it; see there): on whatever adapter wgpu
finds, Inferno's logits against llama.cpp's goldens, and its speed against its own CPU (and
llama.cpp's Vulkan llama-bench, --llama-bench), printed as two tables and written as JSON.

  python3 scripts/gpu_check.py [--bin bin/inferno] [--llama-bench FILE] [--work DIR] [--models DIR...]
                               [--types q8_0,q4_0,q4_k_m] [--bench-file MODEL...] [--pp 256]
                               [--tg 64] [--runs 3] [--depth 2048]
                               [--json FILE] [--skip-bench] [--skip-parity]

Everything it reads is beside it, in the layout of the repository (so it runs from a checkout
as from the folder gpu-check.sh prepares): tests/fixtures/golden (llama.cpp's logits),
tests/fixtures/models (the micro Qwen3 F32 file, its K-quants, the Qwen3 vocabulary), and the
scripts that make every other file from those with numpy and the `gguf` package (copied into
py/ by gpu-check.sh where the machine has none). Each made file is checked against the sha256
its golden records, so the logits compared are of the file llama.cpp ran.
"""

import argparse
import hashlib
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
GOLDENS = ROOT / "tests/fixtures/golden"
FIXTURES = ROOT / "tests/fixtures/models"
# The GPU's bounds from the GPU issue: five times the CPU's (tests/parity.rs), since the GPU
# multiplies f32 activations where the CPU, as llama.cpp's, quantizes them to 8 bits.
# llama_ftype values of the files held to the tight bound: F32, F16, Q8_0, BF16.
TIGHT_FILE_TYPES = (0, 1, 7, 32)
TIGHT, LOOSE = 0.1, 0.5
# Goldens with a wider bound, and why (tests/gpu.rs holds the same): lfm2moe's random router
# and selection bias make near ties between a token's last chosen expert and the next, which
# the CPU's 8-bit activations and the GPU's f32 ones break apart (one step 0.13 off on lavapipe,
# the steps around it 0.03).
WIDER = {"lfm2moe-micro-q8_0.json": 0.2}


def log(message):
    print(f"gpu-check: {message}", file=sys.stderr, flush=True)


def run(command, timeout=600, env=None):
    """(exit status, stdout, stderr) of a command; never raises for a failing one."""
    started = time.monotonic()
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout, env=env)
        status, out, err = done.returncode, done.stdout, done.stderr
    except subprocess.TimeoutExpired as e:
        status, out, err = 124, e.stdout or "", f"timed out after {timeout} s"
    if isinstance(out, bytes):
        out = out.decode(errors="replace")
    log(f"{' '.join(str(c) for c in command)} ({time.monotonic() - started:.1f} s, exit {status})")
    return status, out, err


def last_json(text):
    """The last line of `text` that parses as a JSON object (the CLI prints one with --json)."""
    for line in reversed(text.strip().splitlines()):
        try:
            value = json.loads(line)
        except ValueError:
            continue
        if isinstance(value, dict):
            return value
    return None


def sha256(path):
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def make_test_files(work):
    """The micro files made rather than carried: the Qwen3 quantizations the `gguf` package
    writes byte for byte as llama-quantize did, and every other family's micro file."""
    made = work / "models"
    status, _, err = run([sys.executable, ROOT / "scripts/make_micro_quants.py", FIXTURES, "q8_0", "q4_0"])
    if status != 0:
        log(f"make_micro_quants (q8_0, q4_0) failed: {err.strip()[-400:]}")
    for command in (
        [sys.executable, ROOT / "scripts/make_micro_quants.py", made],
        [sys.executable, ROOT / "scripts/make_micro_models.py", made],
    ):
        status, _, err = run(command)
        if status != 0:
            log(f"{command[1].name} failed: {err.strip()[-400:]}")
    return made


def goldens():
    """llama.cpp's logit goldens (not the tokenizer's or the embeddings')."""
    for path in sorted(GOLDENS.glob("*.json")):
        if path.name.endswith(".embeddings.json"):
            continue
        golden = json.loads(path.read_text())
        prompts = golden.get("prompts")
        if isinstance(prompts, dict) and golden.get("sha256") and all("steps" in p for p in prompts.values()):
            yield path, golden


def find_model(golden, sizes):
    """The file a golden was made on: by its sha256, among the files of its size."""
    for path in sizes.get(golden["size"], []):
        if sha256(path) == golden["sha256"]:
            return path
    return None


def tolerance_for(model):
    """The GPU bound for a file, by the weight type its header names."""
    try:
        import gguf

        field = gguf.GGUFReader(str(model)).fields["general.file_type"]
        file_type = int(field.parts[field.data[0]][0])
    except Exception:  # noqa: BLE001 (no gguf package, or no such key: the loose bound)
        return LOOSE
    return TIGHT if file_type in TIGHT_FILE_TYPES else LOOSE


def parity(binary, folders, device):
    sizes = {}
    for folder in folders:
        for path in sorted(Path(folder).glob("*.gguf")) if Path(folder).is_dir() else []:
            sizes.setdefault(path.stat().st_size, []).append(path)
    rows = []
    for path, golden in goldens():
        row = {"golden": path.name, "model": golden["file"], "tolerance": LOOSE}
        model = find_model(golden, sizes)
        if model is None:
            row["status"] = "no file with the golden's sha256"
            rows.append(row)
            continue
        tolerance = row["tolerance"] = WIDER.get(path.name, tolerance_for(model))
        command = [binary, "logits", model, "--golden", path, "--tolerance", str(tolerance), "--json"]
        if device != "cpu":
            command += ["--device", device]
        status, out, err = run(command)
        report = last_json(out)
        if report is None:
            row["status"] = err.strip().splitlines()[-1] if err.strip() else f"exit {status}"
        else:
            everything = report["all"]
            row.update(
                steps=everything["steps"],
                max_delta=everything["max_delta"],
                top1=everything["top1_agree"],
                misses=len(everything["misses"]),
                status="pass" if report["within"] else "FAIL",
                device=report["device"],
            )
        rows.append(row)
    return rows


def bench(binary, files, args, software_adapter, depth=0):
    """Each file's pp/tg on the GPU, the CPU and llama.cpp's Vulkan backend; with `depth`, after a
    context of that many tokens (`--depth`, llama-bench's `-d`), the GPU and llama.cpp only."""
    command = [binary, "bench", None, "--pp", str(args.pp), "--tg", str(args.tg), "--runs", str(args.runs), "--json"]
    if depth:
        command += ["--depth", str(depth)]
    devices = (("gpu", ["--device", "gpu"]),) if depth else (("gpu", ["--device", "gpu"]), ("cpu", []))
    rows = []
    for path in files:
        command[2] = path
        row = {"model": path.name}
        for device, flags in devices:
            status, out, err = run(command + flags, timeout=900)
            result = last_json(out)
            if result is None:
                row[device] = {"error": err.strip().splitlines()[-1] if err.strip() else f"exit {status}"}
            else:
                row[device] = result
        llama_bench = args.llama_bench
        if llama_bench:
            # llama.cpp passes over devices of type CPU (lavapipe) unless they are named.
            env = {**os.environ, "GGML_VK_VISIBLE_DEVICES": "0"} if software_adapter else None
            status, out, err = run(
                [llama_bench, "-m", path, "-p", str(args.pp), "-n", str(args.tg), "-r", str(args.runs), "-d", str(depth), "-o", "jsonl"],
                timeout=900,
                env=env,
            )
            tests = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
            row["llama_vulkan"] = {
                ("pp" if t.get("n_prompt") else "tg"): t.get("avg_ts") for t in tests
            } or {"error": err.strip()[-200:]}
        rows.append(row)
    return rows


def encoder_bench(binary, work, runs, software_adapter):
    """A picture's embeddings on the GPU and on the CPU (every core): a SigLIP-base-shaped
    Qwen2.5-VL encoder (93M parameters, F16 and Q8_0: make_micro_mmproj.py --shape base) on the
    480 x 360 test picture (476 x 364 for it: 884 patches, window attention). On a software
    adapter (lavapipe took 145 s a picture at this shape) the micro projector stands in."""
    picture = ROOT / "tests/fixtures/images/wide-480x360.png"
    if software_adapter:
        files = [FIXTURES / "clip-qwen25vl-micro.gguf"]
    else:
        files = []
        for weight_type in ("f16", "q8_0"):
            path = work / f"siglip-base-qwen25vl-{weight_type}.mmproj.gguf"
            if not path.exists():
                command = [sys.executable, ROOT / "scripts/make_micro_mmproj.py", path, "--shape", "base"]
                status, _, err = run(command + ["--type", weight_type, "--projector", "qwen25vl"])
                if status != 0:
                    log(f"make_micro_mmproj ({weight_type}) failed: {err.strip()[-400:]}")
                    continue
            files.append(path)
    rows = []
    for path in files:
        row = {"projector": path.name}
        for device, flags in (("gpu", ["--device", "gpu"]), ("cpu", [])):
            command = [binary, "bench", path, "--image", picture, "--runs", str(runs), "--json", *flags]
            status, out, err = run(command, timeout=900)
            result = last_json(out)
            row[device] = result or {"error": err.strip().splitlines()[-1] if err.strip() else f"exit {status}"}
        rows.append(row)
    return rows


def shaped_files(work, types):
    files = []
    for kind in types:
        path = work / f"qwen3-0.6b-shaped-{kind}.gguf"
        if not path.exists():
            status, _, err = run([sys.executable, ROOT / "scripts/make_qwen3_shaped.py", path, "--type", kind], timeout=900)
            if status != 0:
                log(f"make_qwen3_shaped {kind} failed: {err.strip()[-400:]}")
                continue
        files.append(path)
    return files


def number(value, digits=1):
    return "—" if value is None else f"{value:.{digits}f}"


def print_tables(results):
    adapter = results.get("adapter") or {}
    print()
    sums = {True: "; rows summed in subgroups", False: "; rows summed in workgroup memory"}.get(adapter.get("subgroups"), "")
    print(f"adapter: {adapter.get('adapter', '?')} ({adapter.get('backend', '?')}, {adapter.get('device_type', '?')}; driver {adapter.get('driver', '?')}{sums})")
    if adapter.get("device_type") == "Cpu":
        print("  a software adapter: these figures are no speed claim for any GPU")
    print(f"host: {results['host']}")
    if results.get("parity"):
        print()
        print("| golden | device | steps | max abs Δlogit | bound | top-1 | misses | result |")
        print("|---|---|---:|---:|---:|---:|---:|---|")
        for row in results["parity"]:
            if "steps" in row:
                print(
                    f"| {row['golden']} | {results['device']} | {row['steps']} | {row['max_delta']:.4f} | {row['tolerance']} "
                    f"| {row['top1']}/{row['steps']} | {row['misses']} | {row['status']} |"
                )
            else:
                print(f"| {row['golden']} | {results['device']} | | | {row['tolerance']} | | | {row['status']} |")
    if results.get("bench"):
        pp, tg = results["settings"]["pp"], results["settings"]["tg"]
        print()
        print(
            f"| model | GPU pp{pp} | GPU tg{tg} | CPU pp{pp} | CPU tg{tg} | GPU/CPU tg | weights GB/s | copy GB/s | efficiency "
            f"| llama.cpp Vulkan pp | tg | ours/theirs pp | tg |"
        )
        print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
        for row in results["bench"]:
            gpu, cpu = row.get("gpu", {}), row.get("cpu", {})
            figures = gpu.get("gpu") or {}
            theirs = row.get("llama_vulkan") or {}
            ratio = lambda a, b: None if not a or not b else a / b  # noqa: E731
            print(
                f"| {row['model']} | {number(gpu.get('prefill_tok_s'))} | {number(gpu.get('decode_tok_s'))} "
                f"| {number(cpu.get('prefill_tok_s'))} | {number(cpu.get('decode_tok_s'))} "
                f"| {number(ratio(gpu.get('decode_tok_s'), cpu.get('decode_tok_s')), 2)} "
                f"| {number(figures.get('decode_weight_gb_s'), 2)} | {number(figures.get('copy_gb_s'), 2)} "
                f"| {number(ratio(figures.get('decode_weight_gb_s'), figures.get('copy_gb_s')), 3)} "
                f"| {number(theirs.get('pp'))} | {number(theirs.get('tg'))} "
                f"| {number(ratio(gpu.get('prefill_tok_s'), theirs.get('pp')), 2)} "
                f"| {number(ratio(gpu.get('decode_tok_s'), theirs.get('tg')), 2)} |"
            )
            for device in ("gpu", "cpu"):
                if "error" in row.get(device, {}):
                    print(f"  {row['model']} on the {device}: {row[device]['error']}")
        if any("llama_vulkan" in row for row in results["bench"]):
            print(
                "  llama.cpp Vulkan: llama-cpp-python 0.3.36's llama.cpp, built on Debian 12 (scripts/build-llama-vulkan.sh),"
                " whose glslc lacks the integer-dot and cooperative-matrix extensions: those shaders are not in it"
            )
        else:
            print("  (no llama-bench: llama.cpp's Vulkan build is not beside these figures)")
        print_kernels(results["bench"])
        sampled = [(row["model"], (row.get("gpu", {}).get("gpu") or {}).get("sampled")) for row in results["bench"]]
        if any(figures for _, figures in sampled):
            print(
                f"\nDecode steps that sample as the page does (temperature 0.8, top-k 40, top-p 0.95, min-p 0.05,"
                f" a trace of 20):\n"
            )
            print(f"| model | tg{tg}, every logit read back | the best ranked on the GPU | best/every | this adapter's default |")
            print("|---|---:|---:|---:|---|")
            for model, figures in sampled:
                if figures:
                    every, best = figures["every_tok_s"], figures["best_tok_s"]
                    default = "best" if figures["best_by_default"] else "every"
                    print(f"| {model} | {number(every)} | {number(best)} | {number(best / every, 2)} | {default} |")
        dots = [(row["model"], (row.get("gpu", {}).get("gpu") or {}).get("integer_dots")) for row in results["bench"]]
        if any(figures for _, figures in dots):
            print("\nDecode and prefill with the matrix products' inputs as floats, and quantized to 8 bits for integer"
                  " dot products (`dot4I8Packed`; `--device gpu-q8`):\n")
            print(f"| model | tg{tg}, float inputs | 8-bit inputs | 8-bit/float | pp{pp}, float inputs | 8-bit inputs | 8-bit/float |")
            print("|---|---:|---:|---:|---:|---:|---:|")
            for model, figures in dots:
                if figures:
                    floats, q8 = figures["float_tok_s"], figures["q8_tok_s"]
                    floats_pp, q8_pp = figures.get("float_pp_tok_s"), figures.get("q8_pp_tok_s")
                    ratio_pp = q8_pp / floats_pp if floats_pp and q8_pp else None
                    print(f"| {model} | {number(floats)} | {number(q8)} | {number(q8 / floats, 2)} "
                          f"| {number(floats_pp)} | {number(q8_pp)} | {number(ratio_pp, 2)} |")
    if results.get("bench_at_depth"):
        pp, tg, depth = results["settings"]["pp"], results["settings"]["tg"], results["settings"]["depth"]
        print(f"\n## After {depth} tokens of context (`--depth {depth}`, llama-bench's `-d {depth}`)\n")
        print(f"| model | GPU pp{pp} | GPU tg{tg} | llama.cpp Vulkan pp | tg | ours/theirs pp | tg |")
        print("|---|---:|---:|---:|---:|---:|---:|")
        for row in results["bench_at_depth"]:
            gpu, theirs = row.get("gpu", {}), row.get("llama_vulkan") or {}
            ratio = lambda a, b: None if not a or not b else a / b  # noqa: E731
            print(
                f"| {row['model']} | {number(gpu.get('prefill_tok_s'))} | {number(gpu.get('decode_tok_s'))} "
                f"| {number(theirs.get('pp'))} | {number(theirs.get('tg'))} "
                f"| {number(ratio(gpu.get('prefill_tok_s'), theirs.get('pp')), 2)} "
                f"| {number(ratio(gpu.get('decode_tok_s'), theirs.get('tg')), 2)} |"
            )
            if "error" in gpu:
                print(f"  {row['model']} on the gpu: {gpu['error']}")
        print_kernels(results["bench_at_depth"], f" at depth {depth}")
    if results.get("encoder"):
        print("\n## A picture's embeddings (inferno bench MMPROJ --image tests/fixtures/images/wide-480x360.png)\n")
        print("| projector | patches | GPU ms | CPU ms (threads) | GPU speedup |")
        print("|---|---|---|---|---|")
        for row in results["encoder"]:
            gpu, cpu = row.get("gpu", {}), row.get("cpu", {})
            speedup = cpu["encode_ms"] / gpu["encode_ms"] if gpu.get("encode_ms") and cpu.get("encode_ms") else None
            print(
                f"| {row['projector']} | {gpu.get('patches', cpu.get('patches'))} | {number(gpu.get('encode_ms'))} "
                f"| {number(cpu.get('encode_ms'))} ({cpu.get('threads')}) | {number(speedup, 2)} |"
            )
            for device in ("gpu", "cpu"):
                if "error" in row.get(device, {}):
                    print(f"  {row['projector']} on the {device}: {row[device]['error']}")


def print_kernels(rows, at=""):
    """Where each file's GPU time goes, by kernel (bench's profiled run, every dispatch timed)."""
    for row in rows:
        figures = (row.get("gpu") or {}).get("gpu") or {}
        for call, key in (("prefill", "prefill_kernels"), ("decode step", "decode_kernels")):
            kernels = figures.get(key) or []
            total = sum(k["ms"] for k in kernels)
            if not kernels or total <= 0:
                continue
            print()
            print(f"{row['model']}{at}, device time of a {call}: {total:.2f} ms")
            for k in kernels[:8]:
                print(f"  {100 * k['ms'] / total:5.1f} %  {k['ms']:9.3f} ms  {k['kernel']} ({k['dispatches']:g} a call)")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bin", type=Path, default=ROOT / "bin/inferno")
    parser.add_argument("--llama-bench", type=Path, help="llama.cpp's Vulkan llama-bench, run beside ours")
    parser.add_argument("--work", type=Path, default=Path(os.environ.get("TMPDIR", "/tmp")) / "inferno-gpu-check")
    parser.add_argument("--models", type=Path, action="append", default=[], help="more folders with golden files' models")
    parser.add_argument("--types", default="q8_0,q4_0,q4_k_m")
    parser.add_argument("--bench-file", type=Path, action="append", default=[], help="a model to bench besides the Qwen3-shaped files")
    parser.add_argument("--pp", type=int, default=256)
    parser.add_argument("--tg", type=int, default=64)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument(
        "--depth",
        type=int,
        help="also bench after this many tokens of context (default 2048 on a hardware adapter, none on a software one)",
    )
    parser.add_argument(
        "--device",
        choices=("gpu", "gpu-q8", "gpu-float", "cpu"),
        default="gpu",
        help="the device whose logits are checked (gpu: its default inputs; gpu-q8, gpu-float: 8-bit or float inputs)",
    )
    parser.add_argument("--json", type=Path, help="where to write every figure")
    parser.add_argument("--skip-bench", action="store_true")
    parser.add_argument("--skip-parity", action="store_true")
    args = parser.parse_args()
    if not args.bin.exists():
        sys.exit(f"gpu-check: no {args.bin} (scripts/gpu-check.sh prepare builds it)")
    if args.llama_bench and not args.llama_bench.exists():
        sys.exit(f"gpu-check: no {args.llama_bench} (scripts/build-llama-vulkan.sh builds it)")
    args.work.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    results = {
        "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
        "host": f"{platform.node()} {platform.platform()}, {os.cpu_count()} CPUs, Python {platform.python_version()}",
        "device": args.device,
        "settings": {"pp": args.pp, "tg": args.tg, "runs": args.runs, "types": args.types},
    }
    # The adapter, from the smallest bench there is (a micro file, a few tokens).
    status, out, err = run([args.bin, "bench", FIXTURES / "qwen3-micro-f32.gguf", "--device", "gpu", "--pp", "8", "--tg", "4", "--runs", "1", "--json"])
    probe = last_json(out)
    results["adapter"] = (probe or {}).get("gpu") or {"adapter": f"none: {err.strip()[-300:]}"}
    if probe is None:
        log(f"no GPU adapter: {err.strip()[-300:]}")
    if not args.skip_parity:
        made = make_test_files(args.work)
        results["parity"] = parity(args.bin, [FIXTURES, made, *args.models], args.device)
    if not args.skip_bench and probe is not None:
        files = [*args.bench_file, *shaped_files(args.work, [t for t in args.types.split(",") if t])]
        software = results["adapter"].get("device_type") == "Cpu"
        results["bench"] = bench(args.bin, files, args, software)
        depth = args.depth if args.depth is not None else (0 if software else 2048)
        results["settings"]["depth"] = depth
        if depth:
            results["bench_at_depth"] = bench(args.bin, files, args, software, depth)
        results["encoder"] = encoder_bench(args.bin, args.work, args.runs, software)
    results["seconds"] = round(time.monotonic() - started, 1)
    print_tables(results)
    print(f"\n{results['seconds']} s in all")
    if args.json:
        args.json.write_text(json.dumps(results, indent=1, default=str))
        log(f"wrote {args.json}")
    failed = [row["golden"] for row in results.get("parity", []) if row.get("status") == "FAIL"]
    return 1 if failed or probe is None else 0


if __name__ == "__main__":
    sys.exit(main())
