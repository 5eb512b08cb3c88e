"""gpu: torch.cuda's device and free VRAM. SKIP on a host without an NVIDIA device unless this
host generates clips (production visuals in process) or --gpu required."""

from __future__ import annotations

import shutil
from pathlib import Path

from mdame_cli.doctor.context import Doctor
from mdame_domain.doctor import GIB, Status, human_bytes

# Below this much free VRAM a diffusers engine at fp16 is unlikely to fit (SVD's 14 frames).
MIN_FREE_VRAM = 8 * GIB


def _gpu_needed(doctor: Doctor) -> tuple[bool, str]:
    from mdame_runtime.executors import executor_name

    if doctor.options.gpu == "required":
        return True, "--gpu required"
    if doctor.providers != "production":
        return False, f"{doctor.providers or 'unknown'} providers make procedural clips"
    try:
        executor = executor_name()
    except ValueError:
        executor = "?"
    if executor in ("celery", "k8s"):
        return False, f"MDAME_GPU_EXECUTOR={executor}: clips are made on the GPU workers"
    engines = sorted({d.visuals.engine for d in doctor.dimensions}) or ["svd"]
    return True, f"diffusers ({', '.join(engines)}) generates on this host"


def check_gpu(doctor: Doctor) -> None:
    if doctor.options.gpu == "skip":
        doctor.add("gpu", Status.SKIP, "--gpu skip")
        return
    needed, why = _gpu_needed(doctor)
    device = Path("/dev/nvidiactl").exists() or shutil.which("nvidia-smi") is not None
    if not device:
        if needed:
            # No driver device node and no nvidia-smi: torch could not see a GPU either.
            doctor.add("gpu", Status.FAIL, f"no NVIDIA device on this host; needed: {why}")
        else:
            doctor.add("gpu", Status.SKIP, f"no NVIDIA device on this host, none needed ({why})")
        return
    try:
        import torch
    except ImportError:
        doctor.add("gpu", Status.FAIL if needed else Status.WARN, "torch is not installed")
        return
    if not torch.cuda.is_available():
        status = Status.FAIL if needed else Status.WARN
        build = f"torch {torch.__version__}, CUDA build {torch.version.cuda or 'none'}"
        doctor.add("gpu", status, f"torch.cuda.is_available() is False ({build}); {why}")
        return
    free, total = torch.cuda.mem_get_info()
    detail = (
        f"{torch.cuda.get_device_name(0)}: {human_bytes(free)} free of {human_bytes(total)} "
        f"(torch {torch.__version__}, CUDA {torch.version.cuda}, "
        f"{torch.cuda.device_count()} device(s))"
    )
    if needed and free < MIN_FREE_VRAM:
        doctor.add("gpu", Status.WARN, f"{detail}; under {human_bytes(MIN_FREE_VRAM)} free")
        return
    doctor.add("gpu", Status.OK, detail)
