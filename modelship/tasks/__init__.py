"""Tasks: what kind of model an export is (`registry`), with the built-in ones registered on import."""

from modelship.tasks import classification, detection, segmentation, text
from modelship.tasks.registry import (
    DEFAULT_TASK,
    TASKS,
    Prediction,
    Preprocessing,
    Task,
    choose_task,
    get_task,
    register_task,
)

__all__ = [
    "DEFAULT_TASK",
    "TASKS",
    "Prediction",
    "Preprocessing",
    "Task",
    "choose_task",
    "classification",
    "detection",
    "get_task",
    "register_task",
    "segmentation",
    "text",
]
