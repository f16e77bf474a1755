// Plain markdown tables: readable on a terminal and pasted as is into a README.

export function table(header, rows) {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => String(r[i]).length)))
  const line = (cells) => `| ${cells.map((c, i) => String(c).padEnd(widths[i])).join(' | ')} |`
  return [line(header), `|${widths.map((w) => '-'.repeat(w + 2)).join('|')}|`, ...rows.map(line)].join('\n')
}

/** 1234567 -> "1,234,567"; small figures keep significant digits. */
export function num(value, digits = 0) {
  if (!Number.isFinite(value)) return 'n/a'
  if (digits === 0 && Math.abs(value) < 100) digits = Math.abs(value) < 10 ? 2 : 1
  return value.toLocaleString('en-US', { minimumFractionDigits: digits, maximumFractionDigits: digits })
}

export const ratio = (x, y) => (Number.isFinite(x) && Number.isFinite(y) && y !== 0 ? `${(x / y).toFixed(2)}x` : 'n/a')

export const mib = (bytes) => (Number.isFinite(bytes) ? `${(bytes / 1048576).toFixed(1)} MiB` : 'n/a')

export const verdict = (met) => (met === undefined ? 'n/a' : met ? 'met' : 'MISSED')

/** x - y to one decimal, with its sign: `+3.5`, `-0.2`. */
export const delta = (x, y) =>
  Number.isFinite(x) && Number.isFinite(y) ? `${x - y >= 0 ? '+' : ''}${Number((x - y).toFixed(1))}` : 'n/a'
