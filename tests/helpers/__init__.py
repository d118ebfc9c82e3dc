"""What the tests share: paths and composed runs (`runs`), building any attention variant
(`variants`), tiny random Hugging Face models (`hf_tiny`), a wandb offline-log reader
(`wandb_log`) and the authors' reference code of the 2024-25 variants (`references`)."""
