import { existsSync, readFileSync, readdirSync } from 'node:fs'
import { dirname, join, relative } from 'node:path'
import t from 'tap'

/**
 * Every link between the README and docs/ reaches a file that exists and, with a `#fragment`, a heading of
 * it: a page split or a section renamed must not leave a reader on a dead link. Anchors are GitHub's: the
 * heading lower-cased, its punctuation dropped, each space a hyphen, a repeat numbered.
 */
const repository = new URL('..', import.meta.url).pathname
const pages = [
  'README.md',
  ...readdirSync(join(repository, 'docs'))
    .filter((name) => name.endsWith('.md'))
    .map((name) => `docs/${name}`),
]

/** The text outside fenced code blocks, where `#` starts a comment, not a heading. */
function prose(text: string): string {
  return text.replace(/^```[\s\S]*?^```$/gm, '')
}

function anchorsOf(page: string): Set<string> {
  const anchors = new Set<string>()
  const seen = new Map<string, number>()
  for (const [, heading] of prose(readFileSync(join(repository, page), 'utf8')).matchAll(/^#{1,6} +(.+?) *#*$/gm)) {
    const slug = (heading as string)
      .toLowerCase()
      .replace(/[^\p{L}\p{N}\- _]/gu, '')
      .replace(/ /g, '-')
    const count = seen.get(slug) ?? 0
    seen.set(slug, count + 1)
    anchors.add(count === 0 ? slug : `${slug}-${count}`)
  }
  return anchors
}

t.test('every link of the README and docs/ to a page of the repository reaches it, and its heading', async (t) => {
  const dead: string[] = []
  let links = 0
  for (const page of pages) {
    const text = prose(readFileSync(join(repository, page), 'utf8'))
    for (const [, target] of text.matchAll(/\]\(([^)\s]+)\)/g)) {
      if (/^[a-z]+:/.test(target as string)) continue
      links++
      const [file, fragment] = (target as string).split('#') as [string, string | undefined]
      const path = file === '' ? page : relative(repository, join(repository, dirname(page), file))
      if (!existsSync(join(repository, path))) dead.push(`${page}: ${target} (no file)`)
      else if (fragment !== undefined && path.endsWith('.md') && !anchorsOf(path).has(fragment))
        dead.push(`${page}: ${target} (no heading)`)
    }
  }
  t.ok(links > 100, `${links} links read`)
  t.same(dead, [], 'no dead link')
})
