// The library's first import (index.ts): evaluated before the modules that would fail on an older Node.
import { refuseUnsupportedNode } from './node-version.js'

refuseUnsupportedNode(process.versions.node)
