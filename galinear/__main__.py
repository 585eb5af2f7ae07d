from galinear.cli import main

raise SystemExit(main())
