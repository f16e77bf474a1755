// The package's command, dist/cli.js, made executable after a build: in a clone `npx payments-gate` runs it
// directly (README.md), and tsc writes a new file without the executable bit. npm sets the bit itself only where
// it installs the package as a dependency.
import { chmodSync } from 'node:fs'

chmodSync(new URL('../dist/cli.js', import.meta.url), 0o755)
