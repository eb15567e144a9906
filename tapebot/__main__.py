from tapebot import main

raise SystemExit(main())
