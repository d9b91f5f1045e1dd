"""The model FLOPs a Dia training step does on what its batches hold (padding not counted): 2 per weight per token
for the matrix products of a forward pass, plus attention's scores and weighted sums (4 x heads x head size per
query-key pair), times 3 with the backward pass (2 where only LoRA adapters train: the frozen weights need no
gradient of their own). Embedding lookups compute nothing; the logits' projection does."""


class ModelFlops:
    def __init__(self, model, lora: bool = False):
        config = model.config
        encoder, decoder = config.encoder_config, config.decoder_config
        weights = dict(model.named_parameters())
        # the cross-attention's keys and values are projected from the encoder's output: once per text token
        on_text = {n for n in weights if "cross_attention.k_proj" in n or "cross_attention.v_proj" in n}
        self.encoder_weights = sum(p.numel() for n, p in weights.items() if ".encoder.layers." in n or n in on_text)
        self.decoder_weights = sum(
            p.numel()
            for n, p in weights.items()
            if (".decoder.layers." in n or "logits_dense" in n) and n not in on_text
        )
        self.encoder_attention = 4 * encoder.num_attention_heads * encoder.head_dim * encoder.num_hidden_layers
        self.decoder_attention = 4 * decoder.num_attention_heads * decoder.head_dim * decoder.num_hidden_layers
        self.cross_attention = (
            4 * decoder.cross_num_attention_heads * decoder.cross_head_dim * decoder.num_hidden_layers
        )
        self.passes = 2 if lora else 3
        self.tail = max(config.delay_pattern) + 1  # BOS, EOS and the delay tail, less the shift: positions per frame

    def step(self, text_tokens, audio_frames) -> float:
        """Training FLOPs of the rows of a batch: `text_tokens` and `audio_frames` are each row's real lengths."""
        total = 0.0
        for text, frames in zip(text_tokens, audio_frames, strict=True):
            positions = frames + self.tail
            total += 2 * (self.encoder_weights * text + self.decoder_weights * positions)
            total += self.encoder_attention * text * text + self.decoder_attention * positions * positions
            total += self.cross_attention * positions * text
        return self.passes * total
