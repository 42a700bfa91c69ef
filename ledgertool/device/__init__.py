"""Hardware hashing devices: digest-key provisioning and the conformance kit."""
