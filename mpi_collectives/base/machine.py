"""Which machine a process runs on, comparable across ranks: the peer watch (a rank's PIDs mean
something only on its own machine) and the liveness check (hosts other than this one) use it."""
import hashlib


def machine_id(host: str) -> int:
    """Equal for two ranks exactly when their PIDs mean the same processes:
    the host name and this boot of the kernel (containers can share names)."""
    try:
        with open("/proc/sys/kernel/random/boot_id") as f:
            boot = f.read().strip()
    except OSError:
        boot = ""
    return int.from_bytes(hashlib.sha256(f"{host}|{boot}".encode()).digest()[:8], "little", signed=True)
