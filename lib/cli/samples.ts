import { fileURLToPath } from 'node:url'

/**
 * The sample policies the package ships (docs/policies.md, sample policies): `policies/` beside
 * package.json, two folders up from lib/cli/ and from dist/cli/ alike, so that an installed package finds
 * its own wherever it is run from.
 */
export const SAMPLE_POLICIES = fileURLToPath(new URL('../../policies', import.meta.url))
