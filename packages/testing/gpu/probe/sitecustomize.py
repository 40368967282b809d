"""Engine probe for GPU investigations (a development tool; no wheel ships it).

Put this folder first on ``PYTHONPATH`` and set ``VLLM_FACTORY_PROBE_DIR`` for the servers only
(``nox -s bench -- --server-env VLLM_FACTORY_PROBE_DIR=DIR``): every Python process then imports
it, and in the processes that load the GLiNER head it records, into ``DIR/probe-<pid>.json``
(rewritten every 2 s): calls and CPU milliseconds of the head, its BiLSTM and the LSTM kernel;
the kernels' backend choices (never while dynamo traces); every 20th head call synchronised
before and after (its GPU time); and ``DIR/profile-<pid>.txt``: ``torch.profiler``'s kernel
table of the 13th head call, the process's TRITON/TORCH/CUDA/VLLM environment, Triton's runtime
knobs, and each compiled variant of the LSTM kernel with its registers and spills. That run
showed why the kernel collapsed served throughput (kernels-pkg/README.md). Modules are patched
when they are imported (a meta-path hook), so vLLM still imports torch first.
"""

import os

if os.environ.get("VLLM_FACTORY_PROBE_DIR"):
    import functools
    import importlib.abc
    import importlib.machinery
    import json
    import sys
    import threading
    import time

    DIR = os.environ["VLLM_FACTORY_PROBE_DIR"]
    STATS = {
        "pid": os.getpid(),
        "argv": sys.argv[:3],
        "counts": {},
        "ms": {},
        "samples": [],
        "synced": [],
    }
    LOCK = threading.Lock()

    def bump(key, ms=None):
        with LOCK:
            STATS["counts"][key] = STATS["counts"].get(key, 0) + 1
            if ms is not None:
                STATS["ms"][key] = STATS["ms"].get(key, 0.0) + ms

    def writer():
        path = os.path.join(DIR, f"probe-{os.getpid()}.json")
        while True:
            time.sleep(2)
            if STATS["counts"]:
                with LOCK:
                    text = json.dumps(STATS)
                with open(path + ".tmp", "w") as f:
                    f.write(text)
                os.replace(path + ".tmp", path)

    def patch_dispatch(mod):
        import torch

        orig = mod._choose

        @functools.wraps(orig)
        def _choose(backend, *tensors):
            if torch.compiler.is_compiling():  # traced by dynamo: no locks, no counters
                return orig(backend, *tensors)
            out = orig(backend, *tensors)
            bump(f"choose:{backend}->{out}:compiling={torch.compiler.is_compiling()}")
            return out

        mod._choose = _choose

    def patch_triton_lstm(mod):
        orig = mod.lstm_triton
        kern = mod._bilstm_kernel

        @functools.wraps(orig)
        def lstm_triton(gates_x, w_hh, lengths):
            t0 = time.perf_counter()
            out = orig(gates_x, w_hh, lengths)
            ms = (time.perf_counter() - t0) * 1e3
            bump("lstm_triton", ms)
            try:
                n = sum(len(v[0]) for v in kern.device_caches.values())
            except Exception as exc:  # noqa: BLE001
                n = repr(exc)
            with LOCK:
                STATS["triton_cache_entries"] = n
                if len(STATS["samples"]) < 400:
                    STATS["samples"].append([tuple(gates_x.shape), round(ms, 3), n])
            return out

        mod.lstm_triton = lstm_triton

    def patch_head(mod):
        import torch

        o_lstm = mod.WordLSTM.forward

        @functools.wraps(o_lstm)
        def lstm_forward(self, words, lengths):
            t0 = time.perf_counter()
            out = o_lstm(self, words, lengths)
            bump("WordLSTM.forward", (time.perf_counter() - t0) * 1e3)
            return out

        mod.WordLSTM.forward = lstm_forward
        o_head = mod.GLiNERSpanHead.forward

        def describe_kernels():
            try:
                kmod = sys.modules.get("vllm_factory.kernels._triton_lstm")
                found = []
                for cache in kmod._bilstm_kernel.device_caches.values():
                    for key, k in cache[0].items():
                        md = getattr(k, "metadata", None)
                        found.append(
                            {
                                "n_regs": getattr(k, "n_regs", None),
                                "n_spills": getattr(k, "n_spills", None),
                                "num_warps": getattr(md, "num_warps", None),
                                "num_stages": getattr(md, "num_stages", None),
                                "shared": getattr(md, "shared", None),
                                "debug": getattr(md, "debug", None),
                                "key": str(key)[:600],
                            }
                        )
                return found
            except Exception as exc:  # noqa: BLE001
                return repr(exc)

        def profile_call(args, kwargs, self):
            from torch.profiler import ProfilerActivity, profile

            torch.cuda.synchronize()
            with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
                out = o_head(self, *args, **kwargs)
                torch.cuda.synchronize()
            table = prof.key_averages().table(sort_by="cuda_time_total", row_limit=20)
            env = {
                k: v
                for k, v in os.environ.items()
                if k.startswith(("TRITON", "TORCH", "CUDA", "VLLM", "NCCL", "PYTORCH"))
            }
            try:
                import triton

                knobs = {
                    "debug": triton.knobs.runtime.debug,
                    "instr": str(triton.knobs.compilation.instrumentation_mode),
                    "enter_hook": repr(triton.knobs.runtime.launch_enter_hook),
                }
            except Exception as exc:  # noqa: BLE001
                knobs = repr(exc)
            with open(os.path.join(DIR, f"profile-{os.getpid()}.txt"), "w") as f:
                f.write(
                    table
                    + "\n\nENV "
                    + json.dumps(env, indent=1)
                    + "\nKNOBS "
                    + json.dumps(knobs)
                    + "\nKERNELS "
                    + json.dumps(describe_kernels(), indent=1)
                    + f"\nstream {torch.cuda.current_stream()} priority {torch.cuda.current_stream().priority}\n"
                )
            return out

        @functools.wraps(o_head)
        def head_forward(self, *args, **kwargs):
            n = STATS["counts"].get("head.forward", 0)
            if n == 12 and torch.cuda.is_available():
                bump("head.forward")
                try:
                    return profile_call(args, kwargs, self)
                except Exception as exc:  # noqa: BLE001
                    bump(f"profile-failed:{exc!r}")
                    return o_head(self, *args, **kwargs)
            sync = n % 20 == 10 and torch.cuda.is_available()
            if sync:
                torch.cuda.synchronize()
            t0 = time.perf_counter()
            out = o_head(self, *args, **kwargs)
            ms = (time.perf_counter() - t0) * 1e3
            bump("head.forward", ms)
            if sync:
                torch.cuda.synchronize()
                with LOCK:
                    if len(STATS["synced"]) < 200:
                        STATS["synced"].append(
                            [
                                round(ms, 3),
                                round((time.perf_counter() - t0) * 1e3, 3),
                                torch.compiler.is_compiling(),
                                torch.is_inference_mode_enabled(),
                            ]
                        )
            return out

        mod.GLiNERSpanHead.forward = head_forward

    TARGETS = {
        "vllm_factory.kernels._dispatch": patch_dispatch,
        "vllm_factory.kernels._triton_lstm": patch_triton_lstm,
        "vllm_factory.heads.gliner.head": patch_head,
    }

    class _Finder(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path, target=None):
            if name not in TARGETS:
                return None
            spec = importlib.machinery.PathFinder.find_spec(name, path)
            if spec is None or spec.loader is None:
                return spec
            loader, hook = spec.loader, TARGETS[name]
            orig_exec = loader.exec_module

            def exec_module(module):
                orig_exec(module)
                try:
                    hook(module)
                    bump(f"patched:{name}")
                except Exception as exc:  # noqa: BLE001
                    bump(f"patch-failed:{name}:{exc!r}")

            loader.exec_module = exec_module
            return spec

    sys.meta_path.insert(0, _Finder())
    threading.Thread(target=writer, daemon=True).start()
