/**
 * Independent readers of a request target, the oracles of the property tests of targets
 * (test/property/target-readers.test.ts): how a backend, or a hop in front of one, may read the target
 * the gateway sends it. Written apart from lib/ so that they do not share its mistakes: real parsers
 * (WHATWG `URL`, node's legacy `url.parse`), RFC 3986's own algorithms (appendix B, 5.2.2, 5.2.4),
 * and routers that decode, cut and compare leniently.
 */
// eslint-disable-next-line n/no-deprecated-api -- the legacy parser is one of the readers under test
import { parse as legacyParse } from 'node:url'
import { LRUCache } from 'lru-cache'

// node's legacy parser warns once that it is deprecated: here it is an oracle, read on purpose.
process.noDeprecation = true

/** RFC 3986 5.2.4, remove_dot_segments, step by step as the RFC writes it. */
export function removeDotSegments(path: string): string {
  let input = path
  let output = ''
  const dropLast = () => {
    const slash = output.lastIndexOf('/')
    output = slash === -1 ? '' : output.slice(0, slash)
  }
  while (input !== '') {
    if (input.startsWith('../')) input = input.slice(3)
    else if (input.startsWith('./')) input = input.slice(2)
    else if (input.startsWith('/./')) input = input.slice(2)
    else if (input === '/.') input = '/'
    else if (input.startsWith('/../')) {
      input = input.slice(3)
      dropLast()
    } else if (input === '/..') {
      input = '/'
      dropLast()
    } else if (input === '.' || input === '..') input = ''
    else {
      const next = input.indexOf('/', 1)
      const segment = next === -1 ? input : input.slice(0, next)
      output += segment
      input = input.slice(segment.length)
    }
  }
  return output
}

/** RFC 3986 appendix B's regular expression for a URI reference. */
const REFERENCE = /^(([^:/?#]+):)?(\/\/([^/?#]*))?([^?#]*)(\?([^#]*))?(#(.*))?/

/** The path of a reference resolved against `http://gateway/` (RFC 3986 5.2.2, strict). */
export function rfc3986Path(reference: string): string {
  const [, , scheme, authority, , path = ''] = REFERENCE.exec(reference) as RegExpExecArray
  if (scheme !== undefined || authority !== undefined) return removeDotSegments(path)
  if (path === '') return '/'
  return removeDotSegments(path.startsWith('/') ? path : `/${path}`)
}

/** How a URL parser in a backend or a hop reads a target to a path; undefined when it refuses it. */
export const PARSERS: Readonly<Record<string, (target: string) => string | null | undefined>> = {
  'new URL(target, base)': (target) => new URL(target, 'http://gateway').pathname,
  'new URL(base + target)': (target) => new URL(`http://gateway${target}`).pathname,
  'RFC 3986 resolution': rfc3986Path,
  'url.parse(target)': (target) => legacyParse(target).pathname,
  'url.parse(target, false, true)': (target) => legacyParse(target, false, true).pathname,
  'the path as sent': (target) => target.split('?')[0],
}

/** Percent-decoding as a lenient router does it: each valid escape, as UTF-8 where it can be. */
export function percentDecode(text: string): string {
  return text.replace(/(?:%[0-9a-f]{2})+/gi, (run) => Buffer.from(run.replaceAll('%', ''), 'hex').toString('utf8'))
}

/** What a router that compares leniently makes of a path: `\` as `/`, slashes merged, no trailing one, lower case. */
function loosely(path: string): string {
  const merged = path
    .replaceAll('\\', '/')
    .replace(/\/{2,}/g, '/')
    .toLowerCase()
  return merged.length > 1 && merged.endsWith('/') ? merged.slice(0, -1) : merged
}

/** Where a decoded path ends for a router written in C, or one that splits the query and fragment off after decoding. */
function cut(path: string): string {
  const at = path.search(/[\0?#]/)
  return at === -1 ? path : path.slice(0, at)
}

/** Every way a router may read a parsed path before it compares it with its routes. */
export function routerReadings(path: string): string[] {
  const once = percentDecode(path)
  const twice = percentDecode(once)
  const readings = [path, loosely(path)]
  for (const decoded of [once, twice]) {
    readings.push(
      decoded,
      loosely(decoded),
      loosely(removeDotSegments(decoded)),
      loosely(cut(decoded)),
      loosely(removeDotSegments(cut(decoded))),
    )
  }
  return readings
}

/**
 * `read`, computed once an input and kept: a call of `readersTaking` hands the same paths to each parser and router
 * reading, and fast-check draws the same ones again and again. Bounded for `npm run fuzz`'s many runs.
 */
function kept<T>(read: (input: string) => T): (input: string) => T {
  const cache = new LRUCache<string, { readonly value: T }>({ max: 10_000 })
  return (input) => {
    let found = cache.get(input)
    if (found === undefined) cache.set(input, (found = { value: read(input) }))
    return found.value
  }
}

/** PARSERS, kept; undefined where one refuses. */
const PARSING = Object.entries(PARSERS).map(([name, parse]) => [name, kept((input) => attempt(parse, input))] as const)

/** routerReadings in lower case, kept. */
const readingsOf = kept((path) => routerReadings(path).map((reading) => reading.toLowerCase()))

/**
 * The names of the readers that take `target` for one of `paths` (compared in lower case):
 * each parser, alone or behind another that parsed the target and handed its path on, and
 * behind a hop that percent-decodes the target first, then each router reading.
 */
export function readersTaking(target: string, paths: readonly string[]): string[] {
  const wanted = new Set(paths.map((path) => path.toLowerCase()))
  const found: string[] = []
  const inputs: [string, string][] = [
    ['', target],
    ['a decoding hop, then ', percentDecode(target)],
  ]
  for (const [hop, input] of inputs) {
    for (const [first, parse] of PARSING) {
      const once = parse(input)
      if (once === undefined) continue
      const chained: [string, string | undefined][] = [[first, once]]
      for (const [second, parseAgain] of PARSING) chained.push([`${first}, then ${second}`, parseAgain(once)])
      for (const [name, path] of chained) {
        if (path === undefined) continue
        if (readingsOf(path).some((reading) => wanted.has(reading))) found.push(hop + name)
      }
    }
  }
  return found
}

function attempt(parse: (target: string) => string | null | undefined, input: string): string | undefined {
  try {
    return parse(input) ?? undefined
  } catch {
    return undefined
  }
}
