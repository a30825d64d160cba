"""Data models of the simulator (τ²-bench's data_model): the scenario line format and the assistant contract.

Behaviour lives elsewhere (scenarios/, agents/, assistants/, orchestrator/); these modules import nothing from
them, so every component — builder, simulator, scorers — can depend on the models alone.
"""

from services.simulator.data_model.assistant import (
    NOT_ASSISTANT_FAULT,
    TOOL_NAMES,
    Assistant,
    AssistantFailure,
    AssistantTimeout,
    EndpointUnavailable,
    EndReason,
    HistoryItem,
    InfrastructureFailure,
    PatientFailure,
    SessionFailure,
    SessionInterrupted,
    SessionTools,
    StepLimitExceeded,
    TurnRequest,
)
from services.simulator.data_model.scenario import (
    SCENARIO_FORMAT_VERSION,
    ExpectedWrite,
    Fact,
    FieldConstraint,
    MemoryFact,
    Persona,
    RubricItem,
    Scenario,
    Turn,
)

__all__ = [
    "NOT_ASSISTANT_FAULT",
    "SCENARIO_FORMAT_VERSION",
    "Assistant",
    "AssistantFailure",
    "AssistantTimeout",
    "EndpointUnavailable",
    "EndReason",
    "ExpectedWrite",
    "Fact",
    "FieldConstraint",
    "HistoryItem",
    "InfrastructureFailure",
    "MemoryFact",
    "PatientFailure",
    "Persona",
    "RubricItem",
    "Scenario",
    "SessionFailure",
    "SessionInterrupted",
    "SessionTools",
    "StepLimitExceeded",
    "TOOL_NAMES",
    "Turn",
    "TurnRequest",
]
