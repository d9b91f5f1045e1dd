"""Does it still sound like them: speaker similarity with `eval_speaker_model`, a transformers speaker-verification
(x-vector) model such as WavLM's. A sample's embedding is compared, by cosine similarity, with its speaker's reference:
the mean embedding of that speaker's held-out recordings, decoded from their codes by the run's codec (what the model
could at best say, codec and all). A dataset without a speaker column is one speaker. Audio too short for the model
to embed (or none) scores 0: it does not sound like anyone."""

import itertools

import torch

from tpu_demo.errors import LOAD_ERRORS, FineTuneError, require_folder

PIECE = 10  # seconds embedded at once


class Voices:
    def __init__(self, name_or_path: str):
        from transformers import AutoConfig, AutoFeatureExtractor, AutoModelForAudioXVector

        require_folder("eval_speaker_model", name_or_path)
        try:
            architectures = AutoConfig.from_pretrained(name_or_path).architectures or []
            if not any(name.endswith("ForXVector") for name in architectures):
                # transformers would put a random x-vector head on any speech encoder, with a warning only
                raise ValueError(f"its weights are {', '.join(architectures) or 'of no named architecture'}")
            self.extractor = AutoFeatureExtractor.from_pretrained(name_or_path)
            self.model = AutoModelForAudioXVector.from_pretrained(name_or_path).eval()
        except LOAD_ERRORS as error:
            said = " ".join(str(error).split())
            raise FineTuneError(
                f"eval_speaker_model {name_or_path}: not a speaker-verification (x-vector) model transformers loads, "
                f"such as microsoft/wavlm-base-plus-sv ({said[:300]})"
            ) from None
        config = self.model.config
        strides = itertools.accumulate(config.conv_stride, lambda a, b: a * b, initial=1)
        self.shortest = 1 + sum(
            (kernel - 1) * stride for kernel, stride in zip(config.conv_kernel, strides, strict=False)
        )
        self.references = {}  # speaker (None: the one of a dataset without speakers): unit mean embedding

    @torch.no_grad()
    def embed(self, audio, sampling_rate: int) -> torch.Tensor | None:
        """The unit-length speaker embedding of one clip, the mean of its 10 s pieces' (attention over a whole long
        recording would take memory quadratic in its length); None when it is too short to have one."""
        audio = torch.as_tensor(audio).float().flatten().numpy()
        rate = self.extractor.sampling_rate
        if sampling_rate != rate:
            import soxr

            audio = soxr.resample(audio, sampling_rate, rate)
        pieces = [audio[start : start + PIECE * rate] for start in range(0, len(audio), PIECE * rate)]
        pieces = [piece for piece in pieces if len(piece) >= self.shortest]
        if not pieces:
            return None
        embeddings = []
        for piece in pieces:
            # one piece, unpadded: no attention mask (WavLM's meets a deprecation warning of torch's)
            values = self.extractor(piece, sampling_rate=rate, return_tensors="pt")["input_values"]
            embedding = self.model(input_values=values).embeddings[0].float()
            embeddings.append(torch.nn.functional.normalize(embedding, dim=0))
        return torch.nn.functional.normalize(torch.stack(embeddings).mean(0), dim=0)

    def add_references(self, clips) -> None:
        """`clips`: (speaker, audio, sampling_rate) of held-out recordings; each speaker's reference is their mean."""
        embeddings = {}
        for speaker, audio, rate in clips:
            embedding = self.embed(audio, rate)
            if embedding is not None:
                embeddings.setdefault(speaker, []).append(embedding)
        if not embeddings:
            raise FineTuneError("eval_speaker_model: no held-out recording is long enough to be a reference voice")
        self.references = {
            speaker: torch.nn.functional.normalize(torch.stack(found).mean(0), dim=0)
            for speaker, found in embeddings.items()
        }

    def similarity(self, audio, sampling_rate: int, speaker=None) -> float:
        """Cosine similarity to `speaker`'s reference (a speaker without held-out recordings: the closest one)."""
        embedding = self.embed(audio, sampling_rate)
        if embedding is None:
            return 0.0
        if speaker in self.references:
            return cosine(embedding, self.references[speaker])
        return max(cosine(embedding, reference) for reference in self.references.values())

    def stability(self, clips, sampling_rate: int) -> float:
        """How alike one text sounds spoken with different seeds: the mean cosine similarity of every pair."""
        embeddings = [self.embed(audio, sampling_rate) for audio in clips]
        pairs = list(itertools.combinations(embeddings, 2))
        return sum(0.0 if a is None or b is None else cosine(a, b) for a, b in pairs) / len(pairs)


def cosine(a: torch.Tensor, b: torch.Tensor) -> float:
    """Of two unit vectors, within [-1, 1] (float32 rounding can give a vector's own 1.0000001)."""
    return float((a @ b).clamp(-1.0, 1.0))
