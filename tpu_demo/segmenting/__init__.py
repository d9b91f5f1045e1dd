"""Long recordings to the clips a fine-tune reads (`python -m tpu_demo.segment`; docs/DATA.md), one module a stage:

read (the recordings, their text, the audio at the models' rate), cut (where speech is), measure (each piece's
SNR, clipping, band, DNSMOS and voice), transcribe (the recogniser), align (a recording's own text over its
pieces), diarize (who speaks each piece of a dialogue), judge (what is dropped, and why), join (kept neighbours
into clips), write (clips, metadata.csv, the report, the user's corrections); `stages` caches each stage's results,
`settings` sizes them for training, `run` runs them over a process's share of the recordings.
"""
