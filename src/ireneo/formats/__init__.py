"""Formats in: each module turns one outside format into `ireneo.model.Turn`s, or refuses it whole."""
