"""Dia's audio token ids and the label no loss counts: defined once for the data, the loss, samples and statistics."""

CODEBOOK_SIZE = 1024  # audio codes are 0..1023; the special tokens follow them
AUDIO_EOS, AUDIO_PAD, AUDIO_BOS = 1024, 1025, 1026
IGNORED_LABEL = -100  # cross-entropy's `ignore_index`, as transformers' models use it
