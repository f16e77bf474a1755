/**
 * The docs' examples as the tests run them, doctest-like: a fenced block whose line before is the
 * marker `<!-- test: NAME -->` (invisible on the rendered page) is extracted by its name.
 */
import { readFileSync } from 'node:fs'

export interface Snippet {
  readonly name: string
  /** The fence's info string: `ts`, `sh`, `json`. */
  readonly info: string
  readonly code: string
}

const MARKED = /^<!-- test: ([a-z0-9-]+) -->\n```(\w*)\n([\s\S]*?)^```$/gm

/** Every marked block of a page of the repository (`README.md`, `docs/x.md`), by name; a name used twice throws. */
export function snippetsOf(page: string): Map<string, Snippet> {
  const text = readFileSync(new URL(`../../${page}`, import.meta.url), 'utf8')
  const found = new Map<string, Snippet>()
  for (const [, name, info, code] of text.matchAll(MARKED) as IterableIterator<[string, string, string, string]>) {
    if (found.has(name)) throw new Error(`${page}: the marker test: ${name} is used twice`)
    found.set(name, { name, info, code })
  }
  // A marker the pattern missed (not right before a fence) would leave its block untested.
  const markers = text.match(/<!-- test: /g)?.length ?? 0
  if (markers !== found.size) throw new Error(`${page}: a <!-- test: NAME --> marker is not on the line before a fence`)
  return found
}

/** `code` with each `[text, replacement]` made, each text found exactly once: a doc that changes fails here. */
export function substituted(snippet: Snippet, replacements: readonly (readonly [string, string])[]): string {
  let code = snippet.code
  for (const [text, replacement] of replacements) {
    const count = code.split(text).length - 1
    if (count !== 1)
      throw new Error(`${snippet.name}: "${text}" is found ${count} times, where the test expects it once`)
    code = code.replace(text, () => replacement)
  }
  return code
}
