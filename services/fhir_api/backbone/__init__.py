"""The FHIR app's event wiring: store changes into the outbox, session interactions recorded, the relay.

`events/` is the layer below and knows nothing of the FHIR app; this package adapts the app's hooks (store
change listeners, interaction listeners, lifespan) to it. Entry point: `wiring.install_event_backbone(app)`.
"""
