//! Printer columns and JSONPath of custom resources (in progress).
