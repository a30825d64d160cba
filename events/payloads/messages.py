"""Conversation payloads: `rounds.message.doctor|patient|assistant` carry a FHIR R4 Communication.

The log is FHIR-native: `data` is a Communication resource (validated with fhir.resources.R4B). Roles are
Reference.identifier values in the ROLE_SYSTEM code system; the resource type in Reference.type says who they
are in FHIR terms (doctor = Practitioner, patient = Patient, assistant = Device).
"""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from fhir.resources.R4B.communication import Communication as FhirCommunication
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from events.envelope import utc_now

ROLE_SYSTEM = "https://rounds.dev/fhir/CodeSystem/participant-role"
Role = Literal["doctor", "patient", "assistant"]
ROLE_RESOURCE: dict[str, str] = {"doctor": "Practitioner", "patient": "Patient", "assistant": "Device"}


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


class CommunicationRef(BaseModel):
    model_config = ConfigDict(extra="allow", frozen=True)
    reference: str = Field(pattern=r"^Communication/[A-Za-z0-9\-.]{1,64}$")


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
    payload: list[ContentString] = Field(min_length=1)
    inResponseTo: list[CommunicationRef] | None = None  # noqa: N815

    @model_validator(mode="after")
    def _fhir_valid(self) -> Communication:
        for who in (self.sender, *self.recipient):
            if ROLE_RESOURCE[who.identifier.value] != who.type:
                raise ValueError(f"role {who.identifier.value!r} is a {ROLE_RESOURCE[who.identifier.value]}")
        try:
            FhirCommunication.model_validate(self.model_dump(mode="json", exclude_none=True))
        except ValidationError as exc:
            raise ValueError(f"not a valid FHIR R4 Communication: {exc.errors()[0]['msg']}") from None
        return self

    @property
    def sender_role(self) -> str:
        return self.sender.identifier.value

    @property
    def text(self) -> str:
        return "\n".join(part.contentString for part in self.payload)

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
) -> Communication:
    """Build a message payload; `in_response_to` lists Communication ids this message answers."""
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
            **(
                {"inResponseTo": [{"reference": f"Communication/{i}"} for i in in_response_to]}
                if in_response_to
                else {}
            ),
        }
    )
