import { fileURLToPath } from 'node:url'

/**
 * The package's own folder: one up from lib/, from dist/, and from the bundled command dist/cli.js
 * (scripts/bundle-cli.js), whose modules all run from that one file. Whatever the command reads of the
 * package is found from here, so an installed package finds its own files wherever it is run from.
 */
const PACKAGE = new URL('../', import.meta.url)

/** package.json, for `--version`. */
export const PACKAGE_JSON = new URL('package.json', PACKAGE)

/** The sample policies the package ships (docs/policies.md, sample policies). */
export const SAMPLE_POLICIES = fileURLToPath(new URL('policies', PACKAGE))
