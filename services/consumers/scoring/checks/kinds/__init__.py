"""One module per rubric kind, named by the kind (contracts/rubric.py): its check class declares `kind` and
`params`; checks/registry.py imports every module here, so a new kind is its contract entry and one file."""
