"""The best model by `metric_for_best_model`, as the Trainer keeps it: its checkpoint is spared by `save_total_limit`
and loaded at the end with `load_best_model_at_end`; `early_stopping_patience` evaluations without an improvement
(larger than `early_stopping_threshold`) end training, as the Trainer's `EarlyStoppingCallback` does."""


class BestModel:
    def __init__(self, metric: str | None, greater_is_better: bool | None, patience=0, threshold=0.0):
        """`metric`: one the evaluation reports (`check_config` refused any other)."""
        self.key = None if metric is None else metric if metric.startswith("eval_") else f"eval_{metric}"
        self.greater_is_better = bool(greater_is_better)
        self.patience, self.threshold = patience, threshold
        self.best_metric, self.best_step, self.waited, self.last = None, None, 0, None
        self.checkpoints = {}  # step: the metric of the evaluation just before that checkpoint was saved

    def better(self, value, than) -> bool:
        return than is None or (value > than if self.greater_is_better else value < than)

    def evaluated(self, metrics: dict, step: int) -> None:
        value = metrics.get(self.key) if self.key else None
        if value is None:  # eval_samples 0
            return
        self.last = (step, value)
        improved = self.better(value, self.best_metric)
        if improved and (self.best_metric is None or abs(value - self.best_metric) > self.threshold):
            self.waited = 0
        else:
            self.waited += 1
        if improved:
            self.best_metric, self.best_step = value, step

    def saved(self, step: int) -> None:
        if self.last is not None and self.last[0] == step:
            self.checkpoints[step] = self.last[1]

    def best_checkpoint(self) -> int | None:
        """The step of the saved checkpoint with the best metric (the earliest of equals), None before one."""
        best = None
        for step, value in sorted(self.checkpoints.items()):
            if best is None or self.better(value, self.checkpoints[best]):
                best = step
        return best

    @property
    def should_stop(self) -> bool:
        return bool(self.patience) and self.waited >= self.patience

    def state_dict(self) -> dict:
        return {
            "best_metric": self.best_metric,
            "best_step": self.best_step,
            "waited": self.waited,
            "last": self.last,
            "checkpoints": dict(self.checkpoints),
        }

    def load_state_dict(self, state: dict) -> None:
        self.best_metric, self.best_step, self.waited = state["best_metric"], state["best_step"], state["waited"]
        self.last = tuple(state["last"]) if state["last"] else None
        self.checkpoints = {int(step): value for step, value in state["checkpoints"].items()}
