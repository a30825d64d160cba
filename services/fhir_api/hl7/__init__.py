"""HL7 v2.5.1 over MLLP: a stay sent as a hospital interface engine would (`rounds feed --hl7`), and a
listener that takes a connector's ORU/ADT into a session (`rounds hl7 listen`). See README.md."""
