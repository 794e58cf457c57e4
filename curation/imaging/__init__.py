"""Imaging: conversion to canonical NIfTI, normalization, deterministic renders and QC."""
