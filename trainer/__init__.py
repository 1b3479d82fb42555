"""StarPO / StarPO-S trainer: torch + transformers + peft, no Django. See docs/TRAINER.md."""
