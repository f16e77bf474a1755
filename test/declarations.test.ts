import { existsSync, readFileSync } from 'node:fs'
import t from 'tap'
import type { PolicyFile as PolicyFileSchema } from '../lib/policy/file-schema.js'
import type { PolicyFile } from '../lib/policy/policy.js'
import type { RecurringRequest as RecurringSchema, SaleRequest as SaleSchema } from '../lib/schema/bodies.js'
import type { RecurringRequest, SaleRequest } from '../lib/schema/payment.js'
import type { Static } from '../lib/schema/typebox.js'

/**
 * The package's declarations (dist/*.d.ts, from `npm run build`) hold no TypeBox types, so that a project type-checking
 * against them does not load TypeBox's; the types written out for them are the types their schemas validate.
 */
const dist = new URL('../dist/', import.meta.url)

/** True when A and B are the same type, not merely assignable either way (optional members and `never` included). */
type Same<A, B> = (<T>() => T extends A ? 1 : 2) extends <T>() => T extends B ? 1 : 2 ? true : false

t.test(
  "each type written out is its schema's, member for member: npm run typecheck refuses this file otherwise",
  async (t) => {
    const checked: [
      Same<Static<typeof SaleSchema>, SaleRequest>,
      Same<Static<typeof RecurringSchema>, RecurringRequest>,
      Same<Static<typeof PolicyFileSchema>, PolicyFile>,
    ] = [true, true, true]
    t.same(checked, [true, true, true])
  },
)

t.test("no declaration the package's entry points reach imports TypeBox", async (t) => {
  const manifest = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as {
    exports: Record<string, { types?: string }>
  }
  const entries = Object.values(manifest.exports).flatMap((entry) => (entry.types === undefined ? [] : [entry.types]))
  t.ok(entries.length >= 3, 'the main entry, fastify and hono')
  const reached = new Set<string>()
  const typebox = new Set<string>()
  const walk = (file: URL) => {
    if (reached.has(file.href)) return
    reached.add(file.href)
    for (const [, specifier] of readFileSync(file, 'utf8').matchAll(/(?:from|import\()\s*["']([^"']+)["']/g)) {
      if (specifier?.startsWith('.')) {
        const declaration = new URL(specifier.replace(/\.js$/, '.d.ts'), file)
        if (existsSync(declaration)) walk(declaration)
      } else if (specifier?.includes('typebox')) typebox.add(file.href.slice(dist.href.length))
    }
  }
  for (const entry of entries) walk(new URL(entry, new URL('../', import.meta.url)))
  t.ok(reached.size > 20, 'the declarations were walked')
  t.same([...typebox], [], 'none imports TypeBox')
})
