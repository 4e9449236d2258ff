"""The shipped profiles (YAML), installed with the package so the default profile is found after any install."""
