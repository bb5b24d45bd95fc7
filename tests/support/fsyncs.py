"""What a whole-file writer fsynced, in order: each call's path kind and what the target held then."""
import os
import stat


def record_fsyncs(monkeypatch, target):
    """Patch os.fsync to note, for every call, whether its descriptor is a folder or a file and
    the content `target` had at that moment (None while it does not exist)."""
    seen = []
    real = os.fsync

    def fsync(fd):
        kind = "folder" if stat.S_ISDIR(os.fstat(fd).st_mode) else "file"
        seen.append((kind, target.read_text(encoding="utf-8") if target.exists() else None))
        return real(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    return seen
