"""The typed config: schemas (``schema``), their declared ranges (``checks``), enums, composition."""

from gmiexp.config.schema import (
    AsyncConfig,
    BackendConfig,
    BatchConfig,
    ChannelConfig,
    Config,
    EvalConfig,
    HardwareConfig,
    LaunchConfig,
    LayoutConfig,
    LoggerConfig,
    ReductionConfig,
    SearchConfig,
    TaskConfig,
    TrainConfig,
)

__all__ = [
    "AsyncConfig",
    "BackendConfig",
    "BatchConfig",
    "ChannelConfig",
    "Config",
    "EvalConfig",
    "HardwareConfig",
    "LaunchConfig",
    "LayoutConfig",
    "LoggerConfig",
    "ReductionConfig",
    "SearchConfig",
    "TaskConfig",
    "TrainConfig",
]
