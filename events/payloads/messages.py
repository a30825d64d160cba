"""Conversation payloads: `rounds.message.doctor|patient|assistant` carry a FHIR R4 Communication.

The log is FHIR-native: `data` is a Communication resource (validated with fhir.resources.R4B). Roles are
Reference.identifier values in the ROLE_SYSTEM code system; the resource type in Reference.type says who they
are in FHIR terms (doctor = Practitioner, patient = Patient, assistant = Device).
"""

from __future__ import annotations

from contextvars import ContextVar
from datetime import datetime
from typing import ClassVar, Literal

from fhir.resources.R4B.communication import Communication as FhirCommunication
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from events.envelope import utc_now

ROLE_SYSTEM = "https://rounds.dev/fhir/CodeSystem/participant-role"
Role = Literal["doctor", "patient", "assistant"]
ROLE_RESOURCE: dict[str, str] = {"doctor": "Practitioner", "patient": "Patient", "assistant": "Device"}
# One CloudEvent type per sender: a consumer subscribes to the doctor's words without decoding every message.
DOCTOR_MESSAGE = "rounds.message.doctor"
PATIENT_MESSAGE = "rounds.message.patient"
ASSISTANT_MESSAGE = "rounds.message.assistant"
MESSAGE_TYPES: dict[str, str] = {
    "doctor": DOCTOR_MESSAGE, "patient": PATIENT_MESSAGE, "assistant": ASSISTANT_MESSAGE,
}
MESSAGE_PREFIX = "rounds.message."  # what every message type starts with
# Simulator annotations, as FHIR extensions so the payload stays a valid Communication. They are for scorers
# and reports (which turn a message belongs to, which patient facts it disclosed, whether the physician was
# answering a clarifying question); the assistant under test only ever sees the text.
EXT_TURN = "https://rounds.dev/fhir/StructureDefinition/turn"
EXT_DISCLOSED = "https://rounds.dev/fhir/StructureDefinition/disclosed-fact"
EXT_KIND = "https://rounds.dev/fhir/StructureDefinition/message-kind"


class RoleIdentifier(BaseModel):
    model_config = ConfigDict(extra="allow", frozen=True)
    system: Literal["https://rounds.dev/fhir/CodeSystem/participant-role"]
    value: Role


class Participant(BaseModel):
    """A Reference naming a conversation role."""

    model_config = ConfigDict(extra="allow", frozen=True)
    type: Literal["Practitioner", "Patient", "Device"]
    identifier: RoleIdentifier


class ContentString(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    contentString: str = Field(min_length=1)  # noqa: N815 - FHIR element name


STORED_PREFIX = "urn:rounds:blob:"  # + "sha256:<hex>": a text too large for an event, in event_blobs


class StoredText(BaseModel):
    """A FHIR Attachment naming the stored copy of the whole text (events/blobs.py `BlobStore.get`)."""

    model_config = ConfigDict(extra="allow", frozen=True)
    contentType: str  # noqa: N815 - FHIR element name
    url: str = Field(pattern=r"^urn:rounds:blob:sha256:[0-9a-f]{64}$")
    size: int = Field(ge=0)


class ContentAttachment(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    contentAttachment: StoredText  # noqa: N815 - FHIR element name


class CommunicationRef(BaseModel):
    model_config = ConfigDict(extra="allow", frozen=True)
    reference: str = Field(pattern=r"^Communication/[A-Za-z0-9\-.]{1,64}$")


# False while the catalog decodes what the log holds: every event there passed the full R4B Communication
# model when published (publish and publish_raw validate), so a reader checks the Rounds subset only.
FULL_CHECK: ContextVar[bool] = ContextVar("rounds_full_fhir_check", default=True)


class Communication(BaseModel):
    """The subset of a FHIR R4 Communication that a Rounds message requires (other elements are allowed).

    The schema documents the shape; validation also runs the full R4B Communication model.
    """

    model_config = ConfigDict(extra="allow", frozen=True)
    resourceType: Literal["Communication"]  # noqa: N815
    id: str = Field(pattern=r"^[A-Za-z0-9\-.]{1,64}$")
    status: Literal["completed"]
    language: str = Field(pattern=r"^[a-z]{2,3}(-[A-Za-z0-9]{2,8})*$")
    sent: datetime
    sender: Participant
    recipient: list[Participant] = Field(min_length=1)
    payload: list[ContentString | ContentAttachment] = Field(min_length=1)
    inResponseTo: list[CommunicationRef] | None = None  # noqa: N815

    TYPES: ClassVar[dict[str, str]] = MESSAGE_TYPES  # the type is the sender's: see `event_type`

    @model_validator(mode="after")
    def _fhir_valid(self) -> Communication:
        for who in (self.sender, *self.recipient):
            if ROLE_RESOURCE[who.identifier.value] != who.type:
                raise ValueError(f"role {who.identifier.value!r} is a {ROLE_RESOURCE[who.identifier.value]}")
        if not FULL_CHECK.get():
            return self  # read back from the log: the full model ran when it was published
        try:
            FhirCommunication.model_validate(self.model_dump(mode="json", exclude_none=True))
        except ValidationError as exc:
            raise ValueError(f"not a valid FHIR R4 Communication: {exc.errors()[0]['msg']}") from None
        return self

    @property
    def sender_role(self) -> str:
        return self.sender.identifier.value

    @property
    def event_type(self) -> str:
        """The CloudEvent type this message is sent as: the sender's (`rounds.message.doctor`, ...)."""
        return MESSAGE_TYPES[self.sender_role]

    @property
    def text(self) -> str:
        """The text as carried (the head of a text too large for an event: `stored_text` names the rest)."""
        return "\n".join(part.contentString for part in self.payload if isinstance(part, ContentString))

    @property
    def stored_text(self) -> str | None:
        """The blob reference ("sha256:<hex>") of the whole text when it was too large to carry, else None."""
        for part in self.payload:
            if isinstance(part, ContentAttachment):
                return part.contentAttachment.url.removeprefix(STORED_PREFIX)
        return None

    def _extensions(self, url: str) -> list[dict]:
        return [e for e in (getattr(self, "extension", None) or []) if e.get("url") == url]

    @property
    def turn(self) -> int | None:
        """The physician turn this message belongs to (simulator sessions), else None."""
        found = self._extensions(EXT_TURN)
        return found[0].get("valueInteger") if found else None

    @property
    def disclosed_facts(self) -> list[str]:
        """Ids of the patient-memory facts a patient message disclosed."""
        return [e["valueString"] for e in self._extensions(EXT_DISCLOSED)]

    @property
    def kind(self) -> str | None:
        """`question` (asked of the patient), `answer` (turn's final answer), `clarification` ..."""
        found = self._extensions(EXT_KIND)
        return found[0].get("valueCode") if found else None

    def to_data(self) -> dict:
        return self.model_dump(mode="json", exclude_none=True)


def participant(role: str) -> dict:
    return {"type": ROLE_RESOURCE[role], "identifier": {"system": ROLE_SYSTEM, "value": role}}


def communication(
    id: str,
    sender: str,
    recipients: list[str],
    text: str,
    *,
    language: str = "en",
    in_response_to: list[str] | None = None,
    sent: str | None = None,
    turn: int | None = None,
    disclosed: list[str] | None = None,
    kind: str | None = None,
) -> Communication:
    """Build a message payload; `in_response_to` lists Communication ids this message answers; `turn`,
    `disclosed` (patient fact ids) and `kind` become the simulator extensions."""
    extension = (
        ([{"url": EXT_TURN, "valueInteger": turn}] if turn is not None else [])
        + [{"url": EXT_DISCLOSED, "valueString": fact} for fact in disclosed or ()]
        + ([{"url": EXT_KIND, "valueCode": kind}] if kind else [])
    )
    return Communication.model_validate(
        {
            "resourceType": "Communication",
            "id": id,
            "status": "completed",
            "language": language,
            "sent": sent or utc_now(),
            "sender": participant(sender),
            "recipient": [participant(r) for r in recipients],
            "payload": [{"contentString": text}],
            **({"extension": extension} if extension else {}),
            **(
                {"inResponseTo": [{"reference": f"Communication/{i}"} for i in in_response_to]}
                if in_response_to
                else {}
            ),
        }
    )
