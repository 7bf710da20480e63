"""The SGLang-style PP/TP engine: scheduler loop, batch building, stage timing, logs."""
