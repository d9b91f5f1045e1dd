"""Dia's audio token ids, the label no loss counts, and the text tags it reads but does not speak: defined once for
the data, the loss, samples, statistics and evaluation."""

import re

CODEBOOK_SIZE = 1024  # audio codes are 0..1023; the special tokens follow them
AUDIO_EOS, AUDIO_PAD, AUDIO_BOS = 1024, 1025, 1026
IGNORED_LABEL = -100  # cross-entropy's `ignore_index`, as transformers' models use it

TEXT_TAGS = re.compile(r"\[[^\]]*\]")  # speaker ([S1]) and language ([de]) tags
