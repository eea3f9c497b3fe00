"""The output of a batch prediction: its layout, and the file written as ``OUT.partial``
and renamed when complete, resumable after a crash without a repeated or lost line."""

from __future__ import annotations

import csv
import io
import json
import os
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from headwise.intent.batch.records import CSV_COLUMNS, JSONL_KEYS

__all__ = ["OUTPUT_FORMATS", "OutputFile", "output_format_of", "partial_path", "state_path"]

#: output layouts: ``"auto"`` (by extension), JSON lines, CSV
OUTPUT_FORMATS = ("auto", "jsonl", "csv")
_STATE_VERSION = 1


def output_format_of(path: str | Path, output_format: str = "auto") -> str:
    """The layout of an output file: ``output_format`` unless ``"auto"``, else by
    extension (``.jsonl``/``.ndjson``/``.json``: jsonl; ``.csv``/``.tsv``: csv).

    Raises:
        ValueError: an unknown ``output_format``, or ``"auto"`` with another extension.
    """
    if output_format not in OUTPUT_FORMATS:
        raise ValueError(f"output format must be one of {OUTPUT_FORMATS}, got "
                         f"{output_format!r}")
    if output_format != "auto":
        return output_format
    suffix = Path(path).suffix.lower()
    by_suffix = {".jsonl": "jsonl", ".ndjson": "jsonl", ".json": "jsonl", ".csv": "csv",
                 ".tsv": "csv"}
    if suffix not in by_suffix:
        raise ValueError(f"--out {path}: cannot tell the output format from the extension "
                         f"{suffix or '(none)'}; name the file .jsonl or .csv, or pass "
                         f"--format ,jsonl or ,csv")
    return by_suffix[suffix]


def partial_path(out: str | Path) -> Path:
    """Where a run writes before its output is complete: ``OUT.partial``."""
    out = Path(out)
    return out.with_name(out.name + ".partial")


def state_path(out: str | Path) -> Path:
    """The options of an unfinished run, checked on resume: ``OUT.partial.json``."""
    out = Path(out)
    return out.with_name(out.name + ".partial.json")


class OutputFile:
    """The output of a run: written as ``OUT.partial``, renamed to ``OUT`` by
    :meth:`commit`.

    A fresh run (``resume=False``) replaces any earlier partial file. ``resume=True``
    continues ``OUT.partial`` when there is one (its saved options must equal ``state``),
    else a complete ``OUT`` (moved back to ``OUT.partial`` until done), else starts afresh;
    the last complete record gives :attr:`last_line`, and a record cut short is truncated
    away.

    Args:
        path: ``OUT``.
        fmt: ``"jsonl"`` or ``"csv"``.
        resume: continue an earlier output.
        state: the run's options, saved beside the partial file and checked on resume
            (None: none saved, the output cannot be resumed with a check).
        kept: the input's columns each record carries after ``line`` (``--columns TEXT,KEEP...``).

    Attributes:
        last_line: the input line of the last record kept (None: none).
        records: records kept from an earlier run.
        resumed: whether an earlier output was continued.

    Raises:
        ValueError: on resume, options that differ from the saved ones, a partial file
            without them, or an output that is not one of these records.
    """

    def __init__(self, path: str | Path, *, fmt: str, resume: bool = False,
                 state: Mapping[str, Any] | None = None, kept: Sequence[str] = ()) -> None:
        if fmt not in ("jsonl", "csv"):
            raise ValueError(f"output format must be jsonl or csv, got {fmt!r}")
        self.path, self.fmt = Path(path), fmt
        # the fields of a record, in order
        self.keys = ("line", *kept, *JSONL_KEYS[1:])
        self.columns = ("line", *kept, *CSV_COLUMNS[1:])
        self.partial, self.state_file = partial_path(path), state_path(path)
        self.last_line: int | None = None
        self.records = 0
        self.resumed = False
        state = None if state is None else {"version": _STATE_VERSION, **state}
        self.path.parent.mkdir(parents=True, exist_ok=True)
        if resume and self.partial.exists():
            self._check_state(state)
            self.resumed = True
        elif resume and self.path.exists():
            self._save_state(state)
            os.replace(self.path, self.partial)
            self.resumed = True
        else:
            self._save_state(state)
            self.partial.write_bytes(b"")
        keep = self._scan() if self.resumed else 0
        self._file = open(self.partial, "r+b")
        self._file.truncate(keep)
        self._file.seek(keep)
        if keep == 0 and fmt == "csv":
            self.write(_csv_line(self.columns))

    # -- resume -------------------------------------------------------------------------
    def _save_state(self, state: Mapping[str, Any] | None) -> None:
        if state is None:
            self.state_file.unlink(missing_ok=True)
            return
        tmp = self.state_file.with_name(self.state_file.name + ".tmp")
        tmp.write_text(json.dumps(state, indent=1, default=str), encoding="utf-8")
        os.replace(tmp, self.state_file)

    def _check_state(self, state: Mapping[str, Any] | None) -> None:
        if state is None:
            return
        if not self.state_file.is_file():
            raise ValueError(f"cannot resume {self.partial}: {self.state_file}, which holds "
                             f"the options of the run, is missing; start again without "
                             f"--resume")
        saved = json.loads(self.state_file.read_text(encoding="utf-8"))
        now = json.loads(json.dumps(state, default=str))
        differ = [k for k in sorted(set(saved) | set(now)) if saved.get(k) != now.get(k)]
        if differ:
            what = "; ".join(f"{k}: {saved.get(k)!r} then, {now.get(k)!r} now" for k in differ)
            raise ValueError(f"cannot resume {self.partial} with other options than it was "
                             f"started with ({what}); rerun with the same options, or "
                             f"without --resume to start again")

    def _scan(self) -> int:
        """Bytes of the partial file up to the end of its last complete record (sets
        :attr:`last_line` and :attr:`records`)."""
        if self.fmt == "jsonl":
            return self._scan_jsonl()
        return self._scan_csv()

    def _not_ours(self, why: str) -> ValueError:
        return ValueError(f"cannot resume {self.partial}: {why}; it is not the output of "
                          f"`headwise predict --data` in "
                          f"{self.fmt} (start again without --resume)")

    def _scan_jsonl(self) -> int:
        size = self.partial.stat().st_size
        with open(self.partial, "rb") as f:
            end = _rfind_newline(f, size)  # a tail after the last newline is cut short
            if end < 0:
                return 0
            start = _rfind_newline(f, end) + 1
            f.seek(start)
            last = f.read(end - start)
            f.seek(0)
            left, self.records = end + 1, 0
            while left > 0:
                block = f.read(min(left, 1 << 20))
                self.records += block.count(b"\n")
                left -= len(block)
        try:
            rec = json.loads(last)
        except (json.JSONDecodeError, UnicodeDecodeError):
            raise self._not_ours("its last complete line is not JSON") from None
        if not isinstance(rec, dict) or tuple(rec) != self.keys \
                or not isinstance(rec["line"], int):
            raise self._not_ours("its last record does not have the fields "
                                 + ", ".join(self.keys))
        self.last_line = rec["line"]
        return end + 1

    def _scan_csv(self) -> int:
        keep, consumed = 0, 0
        ended = True  # whether the lines read so far end with a newline

        def lines() -> Iterator[str]:
            nonlocal consumed, ended
            with open(self.partial, "rb") as f:
                for raw in f:
                    consumed += len(raw)
                    ended = raw.endswith(b"\n")
                    yield raw.decode("utf-8", errors="replace")

        size = self.partial.stat().st_size
        reader = csv.reader(lines())
        columns = list(self.columns)
        header = None
        self.records = 0
        try:
            for row in reader:
                if not ended:
                    break  # the tail, cut short
                if header is None:
                    header = row
                    if header != columns:
                        raise self._not_ours(f"its header is {','.join(header)}, not "
                                             f"{','.join(columns)}")
                    keep = consumed
                    continue
                if len(row) != len(columns) or not row[0].isdigit():
                    if consumed == size:
                        break  # a quoted field cut short after one of its newlines
                    raise self._not_ours(f"a row ending at byte {consumed} is not a record")
                self.last_line, keep = int(row[0]), consumed
                self.records += 1
        except csv.Error:  # a quoted field cut short at the end of the file
            pass
        return keep

    # -- writing ------------------------------------------------------------------------
    def write(self, text: str) -> None:
        """Append ``text`` (whole records) and flush it to the operating system."""
        self._file.write(text.encode("utf-8"))
        self._file.flush()

    def commit(self) -> Path:
        """Sync the partial file to disk, rename it to ``OUT`` and drop the saved options.

        Returns:
            ``OUT``.
        """
        self._file.flush()
        os.fsync(self._file.fileno())
        self._file.close()
        os.replace(self.partial, self.path)
        self.state_file.unlink(missing_ok=True)
        return self.path

    def discard(self) -> None:
        """Close and remove the partial file and the saved options: a run that has no
        answer to give leaves nothing behind."""
        self.close()
        self.partial.unlink(missing_ok=True)
        self.state_file.unlink(missing_ok=True)

    def close(self) -> None:
        """Close the file (the partial file stays, for ``resume``, unless committed)."""
        if not self._file.closed:
            self._file.close()


def _csv_line(fields: Sequence[str]) -> str:
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\n").writerow(fields)
    return buf.getvalue()


def _rfind_newline(f: Any, end: int, block: int = 1 << 16) -> int:
    """Offset of the last ``\\n`` before byte ``end`` of a binary file, or -1."""
    pos = end
    while pos > 0:
        start = max(0, pos - block)
        f.seek(start)
        found = f.read(pos - start).rfind(b"\n")
        if found >= 0:
            return start + found
        pos = start
    return -1
