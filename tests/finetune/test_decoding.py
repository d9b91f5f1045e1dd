"""Recordings soundfile cannot read (M4A, a video's audio) are decoded by ffmpeg into the dataset's stage folder;
what ffmpeg cannot decode is named, never skipped without a word, and the user's folder is never written into."""

import shutil
import subprocess

import pytest
import soundfile

from tests import planted_faults
from tests.finetune.test_segmenting import needs_speech_models, rows, segmented, snapshot

needs_ffmpeg = pytest.mark.skipif(shutil.which("ffmpeg") is None, reason="needs ffmpeg (Debian: apt install ffmpeg)")


def ffmpeg(*args):
    subprocess.run(["ffmpeg", "-nostdin", "-loglevel", "error", "-y", *map(str, args)], check=True)


@needs_ffmpeg
@pytest.mark.xdist_group("segment")
def test_m4a_and_a_videos_audio_are_decoded_and_what_ffmpeg_cannot_read_is_named(tmp_path):
    needs_speech_models()
    raw, said = tmp_path / "memos", planted_faults.SENTENCES[:3]
    raw.mkdir()
    samples, _ = planted_faults.talk(said, planted_faults.VOICES["alice"], 44100, seed=3)
    soundfile.write(tmp_path / "speech.wav", samples, 44100)
    ffmpeg("-i", tmp_path / "speech.wav", "-c:a", "aac", "-b:a", "96k", raw / "phone memo.m4a")
    # a video whose audio is a second stream: the first audio stream is read, not the picture
    ffmpeg("-f", "lavfi", "-i", "color=c=blue:s=64x64:d=30", "-i", tmp_path / "speech.wav", "-shortest",
           "-c:v", "libx264" if "libx264" in encoders() else "mpeg4", "-c:a", "aac", raw / "talk.mp4")  # fmt: skip
    ffmpeg("-f", "lavfi", "-i", "color=c=red:s=64x64:d=1", "-an", raw / "silent film.mp4")
    (raw / "broken.m4a").write_bytes(b"\x00\x00\x00\x20ftypM4A " + bytes(200))
    for name in ("phone memo", "talk"):
        (raw / f"{name}.txt").write_text(" ".join(said), encoding="utf-8")
    before = snapshot(raw)
    report = segmented(raw, tmp_path / "out")
    assert snapshot(raw) == before  # decoded into the dataset folder, not beside the user's files
    kept = [clip for clip in report["clips"] if not clip["dropped"]]
    assert {clip["recording"] for clip in kept} == {"phone memo", "talk"}
    texts = [row["text"].removeprefix("[S1] ") for row in rows(tmp_path / "out")]
    assert len(texts) >= 2 and all(text in " ".join(said) for text in texts), texts
    assert report["skipped"]["silent film.mp4"] == "ffmpeg finds no audio stream in it"
    assert report["skipped"]["broken.m4a"].startswith("ffmpeg cannot decode it (")
    # a rerun decodes nothing again (the decoding is the same file's); a changed file is decoded again
    decoded = sorted((tmp_path / "out" / ".segmenting").rglob("decoded.flac"))
    times = [path.stat().st_mtime_ns for path in decoded]
    segmented(raw, tmp_path / "out")
    assert [path.stat().st_mtime_ns for path in decoded] == times
    ffmpeg("-i", tmp_path / "speech.wav", "-t", "4", "-c:a", "aac", raw / "phone memo.m4a")
    segmented(raw, tmp_path / "out")
    assert [path.stat().st_mtime_ns for path in decoded] != times


def encoders() -> str:
    return subprocess.run(["ffmpeg", "-hide_banner", "-encoders"], capture_output=True, text=True).stdout
