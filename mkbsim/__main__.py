from mkbsim.cli import main

raise SystemExit(main())
