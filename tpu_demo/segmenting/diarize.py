"""The diarize stage: who speaks each piece of a recording. A recording of two voices is a dialogue: without a
transcript each piece is tagged by its voice, the recording's first voice `[S1]` and the other `[S2]` in every clip of
it, as Dia reads dialogues; with one, its own tags are the turns. Each voice's pieces are judged by that voice, not by
the other's. The voices are told by the pieces' 1.6 s GE2E windows, clustered by spectral clustering (spectralcluster;
the number of voices from the eigengap), so that two alike voices are told apart relative to each other; each window is
of the voice it is clearly nearest. A piece whose windows are of two voices (a turn without a pause) is dropped as
`uncertain voice`, and so is a third voice's. A recording of too few windows is clustered by its pieces' voices
(average linkage, SciPy); where all these hear one voice, its windows split in two are two alike voices when the halves
are apart as two voices are (`split_in_two`). The first voice is the one of the earliest window clearly of a voice,
over the pieces as cut at turns (turns.py cuts a short first turn from the piece it began). Not caught: turns under two
windows in a run of quick turns."""

import numpy as np

from tpu_demo.segmenting.judge import DIARIZE_SIMILARITY, VOICE_SECONDS, mean_voice
from tpu_demo.segmenting.measure import VOICE_HOP, VOICE_WINDOW, Piece

MIN_VOICE_PIECES, MIN_VOICE_SECONDS = 2, 3.0  # a voice of a dialogue speaks at least this often and this long
TAGS = ("[S1]", "[S2]")  # Dia's speakers
SOUND_GAP = 0.5  # seconds: a short sound this close to a turn is that turn's
WINDOW, HOP = VOICE_WINDOW, VOICE_HOP  # a piece's GE2E windows, and between their starts (seconds)
MIN_VOICE_WINDOWS, WINDOW_MARGIN = 3, 0.1  # a voice's fewest windows; how much nearer one a window is
SPECTRAL_WINDOWS, MAX_VOICES = 30, 4  # the fewest windows spectral clustering is run on; the most voices it finds
SPLIT_WINDOWS = 9  # the fewest split in two (a 15 s dialogue has 10-12; measured from 9)
REFINE_STEPS = 3  # k-means steps from the spectral clusters' means to the voices
WINDOW_MARGIN_SHARE = 0.15  # a window is of a voice when nearer it than any other by this share of their distance
SPLIT_SIMILARITY, SPLIT_APART = 0.86, 0.1  # two halves of a recording's windows are two voices: less alike, more apart


def voiced(pieces: list[Piece]) -> list[Piece]:
    return [p for p in pieces if not p.dropped and p.voice and p.end - p.start >= VOICE_SECONDS]


def voices_of(pieces: list[Piece]) -> list[list[Piece]]:
    """The recording's voices: its voiced pieces clustered, the clusters of at least MIN_VOICE_PIECES pieces and
    MIN_VOICE_SECONDS s, in the order they are first heard."""
    found = voiced(pieces)
    if len(found) < 2 * MIN_VOICE_PIECES:
        return [found] if found else []
    from scipy.cluster.hierarchy import fcluster, linkage

    vectors = np.array([piece.voice for piece in found], dtype=np.float64)
    labels = fcluster(linkage(vectors, method="average", metric="cosine"), 1 - DIARIZE_SIMILARITY, "distance")
    clusters = [[piece for piece, label in zip(found, labels, strict=True) if label == name] for name in set(labels)]
    major = [
        cluster for cluster in clusters
        if len(cluster) >= MIN_VOICE_PIECES and sum(p.end - p.start for p in cluster) >= MIN_VOICE_SECONDS
    ]  # fmt: skip
    # a cluster whose mean voice is as like another's as one voice's pieces are: that voice, changed (a second
    # voice over some of its pieces, a noisier stretch); two people's mean voices were 0.67 alike, such a one 0.83
    voices = []
    for cluster in sorted(major, key=len, reverse=True):
        same = next(
            (voice for voice in voices if float(mean_voice(voice) @ mean_voice(cluster)) >= DIARIZE_SIMILARITY), None
        )
        if same is None:
            voices.append(cluster)
        else:
            same += cluster
    return sorted(voices, key=lambda voice: first_heard(voice, voices, pieces))


def first_heard(voice: list[Piece], voices: list[list[Piece]], pieces: list[Piece]) -> float:
    """When a voice is first heard in its recording: its first piece, or an earlier one dropped for another reason
    (noise, band) whose voice is nearest to it, as like it as its own pieces are (DIARIZE_SIMILARITY)."""
    centres = np.array([mean_voice(other) for other in voices])
    own = next(index for index, other in enumerate(voices) if other is voice)
    earlier = [piece.start for piece in pieces if piece.dropped and piece.voice
               and int(np.argmax(centres @ np.asarray(piece.voice))) == own
               and float(centres[own] @ np.asarray(piece.voice)) >= DIARIZE_SIMILARITY]  # fmt: skip
    return min([*earlier, *(piece.start for piece in voice)])


def gap(piece: Piece, other: Piece) -> float:
    """Seconds between two pieces."""
    return max(other.start - piece.end, piece.start - other.end, 0.0)


def diarize(pieces: list[Piece], voices_from: list[Piece] | None = None) -> int:
    """Tags each kept piece of a recording without a transcript with its voice (`piece.turn`) where it holds two:
    a piece of two voices, of a third voice, or of neither (too short to tell) is dropped as `uncertain voice`.
    The voices are told from `voices_from` (the pieces before they were cut at turns: turns.py), else the pieces.
    Returns how many voices it holds (1: all `[S1]`, as before)."""
    centres, spectral = voice_centres(voices_from or pieces)
    if len(centres) > 1:
        centres = centres[heard_first(pieces, centres)]
    labels = {}
    if spectral:  # each window the voice it is clearly nearest
        labels = {id(piece): {voice for window in piece.voice_windows or []
                              if (voice := window_voice(np.asarray(window), centres)) is not None}
                  for piece in pieces}  # fmt: skip
    if len(centres) < 2:
        for piece in pieces:
            piece.turn = TAGS[0]
        return max(len(centres), 1 if pieces else 0)
    unsure = []
    for piece in pieces:
        if piece.dropped or not piece.voice:
            continue
        heard = labels.get(id(piece)) or voices_in_windows(piece, centres)
        if len(heard) > 1:  # a turn without a pause between them
            piece.dropped = "uncertain voice"
            named = [TAGS[voice] if voice < len(TAGS) else "a third voice" for voice in sorted(heard)]
            piece.detail = f"two voices in one piece: its {WINDOW} s windows are of {' and '.join(named)}"
            continue
        similarity = centres @ np.asarray(piece.voice)
        best = next(iter(heard)) if heard else int(np.argmax(similarity))
        if best < len(TAGS) and (heard or similarity[best] >= DIARIZE_SIMILARITY):
            piece.turn = TAGS[best]
        else:
            unsure.append((piece, best, float(similarity[best])))
    for piece, best, similarity in unsure:
        short = piece.end - piece.start < VOICE_SECONDS
        clear = {window_voice(np.asarray(window), centres) for window in piece.voice_windows or []}
        if short and len(clear) == 1 and None not in clear and (voice := clear.pop()) < len(TAGS):
            piece.turn = TAGS[voice]  # a short turn clearly of one voice (one cut from the next: turns.short_turns)
            continue
        # a short sound close after or before a turn (a laugh, "mm"): too short for its voice to tell, that turn's
        near = [other for other in pieces if other.turn and gap(piece, other) <= SOUND_GAP]
        if short and near and best < len(TAGS):
            piece.turn = min(near, key=lambda other: gap(piece, other)).turn
            continue
        piece.dropped = "uncertain voice"
        which = "a third voice" if best >= len(TAGS) else "neither voice of its recording"
        piece.detail = f"{which}: similarity {similarity:.2f} to its nearest"
    return len(centres)


def heard_first(pieces: list[Piece], centres: np.ndarray) -> np.ndarray:
    """The order of the voices by the first window clearly of each (`window_voice`), over the pieces as cut at turns:
    a short first turn cut from the piece it began (turns.short_turns) has a window of its own, where the uncut
    piece's first window heard the next voice more. A voice never clearly heard keeps its place after the others."""
    first = np.full(len(centres), np.inf)
    for piece in pieces:
        for number, window in enumerate(piece.voice_windows or [] if piece.voice else []):
            if (voice := window_voice(np.asarray(window), centres)) is not None:
                first[voice] = min(first[voice], piece.start + number * HOP)
    return np.argsort(first, kind="stable")


def voice_centres(pieces: list[Piece]) -> tuple[np.ndarray, bool]:
    """The recording's voices (unit vectors, in the order first heard) and whether spectral clustering told them:
    too few windows to cluster, or one voice to it (its smoothing over neighbouring windows can merge turns a few
    hundred ms apart), the pieces' voices are clustered, else their windows' (average linkage), else the windows
    are split in two (`split_in_two`: two alike voices the eigengap heard as one)."""
    centres = spectral_voices(pieces)
    if centres is not None and len(centres) >= 2:
        return centres, True
    voices = voices_of(pieces)
    if len(voices) > 1:
        return np.array([mean_voice(voice) for voice in voices]), False
    centres = window_voices(pieces)
    if len(centres) > 1:
        return centres, False
    split = split_in_two(pieces)
    return (split, True) if len(split) else (centres, False)


def spectral_voices(pieces: list[Piece]) -> np.ndarray | None:
    """The voices of a recording told by its pieces' WINDOW s windows (GE2E), clustered by spectral clustering
    (spectralcluster: the number of voices from the eigengap of the windows' affinities, so two alike voices are
    told apart relative to each other, where a fixed similarity took them for one). The windows of every piece with
    a voice count, those dropped for noise too (the first voice heard may be in one). Returns each voice's unit
    mean, in the order first heard (a voice of at least MIN_VOICE_WINDOWS windows and MIN_VOICE_SECONDS); None where
    there are too few windows to cluster."""
    if (found := clustered(pieces, 1)) is None:
        return None
    windows, vectors, labels, major = found
    if len(major) < 2:
        return np.zeros((len(major), vectors.shape[1]))
    return refined(windows, vectors, labels, major)


def split_in_two(pieces: list[Piece]) -> np.ndarray:
    """Two alike voices the eigengap took for one (two espeak-ng women 0.82 alike): the windows split in two by
    spectral clustering, two voices where the halves are apart as two voices are, not as one voice's windows vary.
    Over 16 one-voice recordings such halves were 0.89-0.97 alike, their windows 0.02-0.08 more like their own half
    than the other; over 18 dialogues 0.48-0.82 and 0.13-0.43. A recording too short to count its voices by the
    eigengap (under SPECTRAL_WINDOWS windows) is split so too: 36 one-voice recordings of 13-39 s (12 voices) were
    0.84-0.96 and 0.01-0.06, all one voice; 21 of 24 dialogues as long (8 pairs) 0.45-0.82 and 0.12-0.46, two voices
    (before, 15); espeak-ng's en-us+m3 and en-gb+f2, 0.86-0.90 alike in GE2E, stay one. Returns the two voices' unit
    means, or none."""
    if (found := clustered(pieces, 2, SPLIT_WINDOWS)) is None or len(found[3]) < 2:
        return np.zeros((0, 0))
    windows, vectors, labels, major = found
    centres = refined(windows, vectors, labels, major)
    nearest = np.argmax(vectors @ centres.T, axis=1)
    similarity, same = vectors @ vectors.T, nearest[:, None] == nearest[None, :]
    within = (similarity[same].sum() - len(vectors)) / (same.sum() - len(vectors))
    apart = within - similarity[~same].mean() if (~same).any() else 0.0
    two = len(centres) == 2 and float(centres[0] @ centres[1]) < SPLIT_SIMILARITY and apart >= SPLIT_APART
    return centres if two and all(is_voice((nearest == voice).sum()) for voice in range(2)) else np.zeros((0, 0))


def voice_windows(pieces: list[Piece]) -> list[tuple[float, np.ndarray]]:
    """The GE2E windows of every piece with a voice, each with when it starts."""
    return [(piece.start + number * HOP, np.asarray(window)) for piece in pieces if piece.voice
            for number, window in enumerate(piece.voice_windows or [])]  # fmt: skip


def is_voice(windows: int) -> bool:
    return windows >= MIN_VOICE_WINDOWS and WINDOW * windows >= MIN_VOICE_SECONDS


def clustered(pieces: list[Piece], least: int, fewest: int = SPECTRAL_WINDOWS) -> tuple | None:
    """The pieces' windows (`voice_windows`), their vectors, their labels by spectralcluster's clusterer (its ICASSP
    2018 refinement, `least` to MAX_VOICES voices) and the labels that are voices (`is_voice`); None where there are
    fewer than `fewest` windows."""
    windows = voice_windows(pieces)
    if len(windows) < fewest:
        return None
    from spectralcluster import FallbackOptions, RefinementOptions, SpectralClusterer, ThresholdType, configs

    vectors = np.array([window for _, window in windows], dtype=np.float64)
    clusterer = SpectralClusterer(
        min_clusters=least,
        max_clusters=MAX_VOICES,
        refinement_options=RefinementOptions(
            gaussian_blur_sigma=1,
            p_percentile=0.95,
            thresholding_soft_multiplier=0.01,
            thresholding_type=ThresholdType.RowMax,
            refinement_sequence=configs.ICASSP2018_REFINEMENT_SEQUENCE,
        ),
        fallback_options=FallbackOptions(spectral_min_embeddings=fewest),
    )
    labels = clusterer.predict(vectors)
    return windows, vectors, labels, [label for label in set(labels) if is_voice((labels == label).sum())]


def refined(windows, vectors: np.ndarray, labels: np.ndarray, major: list) -> np.ndarray:
    """The voices of the clusters `major`: the clusterer smooths its labels over neighbouring windows (a turn's
    edges), so they are its clusters' means refined by each window's nearest (k-means steps), in the order of each
    one's first nearest window."""
    centres = np.array([unit(vectors[labels == label].mean(axis=0)) for label in major])
    for _ in range(REFINE_STEPS):
        nearest = np.argmax(vectors @ centres.T, axis=1)
        centres = np.array([unit(vectors[nearest == k].mean(axis=0)) if (nearest == k).any() else centres[k]
                            for k in range(len(centres))])  # fmt: skip
    nearest = np.argmax(vectors @ centres.T, axis=1)
    first = [min(at for (at, _), k in zip(windows, nearest, strict=True) if k == voice) if (nearest == voice).any()
             else np.inf for voice in range(len(centres))]  # fmt: skip
    return centres[np.argsort(first)]


def window_voice(window: np.ndarray, centres: np.ndarray) -> int | None:
    """The voice a window is of: the one it is nearer than any other by WINDOW_MARGIN_SHARE of their distance."""
    similarity = np.sort(centres @ window)[::-1]
    apart = WINDOW_MARGIN_SHARE * (1 - float(np.max(np.triu(centres @ centres.T, 1))))
    return int(np.argmax(centres @ window)) if similarity[0] - similarity[1] >= apart else None


def unit(vector: np.ndarray) -> np.ndarray:
    return vector / np.linalg.norm(vector)


def window_voices(pieces: list[Piece]) -> np.ndarray:
    """The voices of a recording whose pieces each sound as one voice (no pause parts its turns): its pieces'
    WINDOW s windows clustered as the pieces are (average linkage, DIARIZE_SIMILARITY), each cluster of at least
    MIN_VOICE_WINDOWS windows and a fifth of them; the unit mean of each, in the order first heard. One voice's
    windows fall in one cluster but for a stray 2 or 3 in a hundred (16 recordings of 13 voices measured)."""
    windows = [(piece.start + number, np.asarray(window)) for piece in voiced(pieces)
               for number, window in enumerate(piece.voice_windows or [])]  # fmt: skip
    if len(windows) < 2 * MIN_VOICE_WINDOWS:
        return np.zeros((0, 0))
    from scipy.cluster.hierarchy import fcluster, linkage

    vectors = np.array([window for _, window in windows], dtype=np.float64)
    labels = fcluster(linkage(vectors, method="average", metric="cosine"), 1 - DIARIZE_SIMILARITY, "distance")
    least = max(MIN_VOICE_WINDOWS, len(windows) / 5)  # windows over a change of voice make small clusters of their own
    major = [name for name in set(labels) if (labels == name).sum() >= least]
    first = {name: min(at for (at, _), label in zip(windows, labels, strict=True) if label == name) for name in major}
    centres = []
    for name in sorted(major, key=first.get):  # a cluster as like one before as one voice's windows: that voice
        centre = vectors[labels == name].mean(axis=0)
        centre /= np.linalg.norm(centre)
        if all(float(centre @ other) < DIARIZE_SIMILARITY for other in centres):
            centres.append(centre)
    return np.array(centres)


def voices_in_windows(piece: Piece, centres: np.ndarray) -> set[int]:
    """The voices a piece's windows are of: each window's nearest, where it is as like it as one voice's windows are
    and clearly nearer it than any other (WINDOW_MARGIN)."""
    heard = set()
    for window in piece.voice_windows or []:
        similarity = np.sort(centres @ np.asarray(window))[::-1]
        if similarity[0] >= DIARIZE_SIMILARITY and similarity[0] - similarity[1] >= WINDOW_MARGIN:
            heard.add(int(np.argmax(centres @ np.asarray(window))))
    return heard


def turns_of(pieces: list[Piece]) -> list[list[Piece]]:
    """A dialogue's pieces by the one voice their text gives them (`piece.turn`, or their text's only tag); a piece
    holding both voices' turns is in none (its voice is not one speaker's)."""
    import re

    groups = {}
    for piece in pieces:
        tags = set(re.findall(r"\[S[12]\]", piece.text or "")) or ({piece.turn} if piece.turn else set())
        if len(tags) == 1:
            groups.setdefault(tags.pop(), []).append(piece)
    return [groups[tag] for tag in sorted(groups)]
