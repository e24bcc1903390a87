from ama_acp.cli import main

raise SystemExit(main())
