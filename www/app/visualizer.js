// @ts-check
// The sampling visualizer: for one decode step, the top candidates as bars (green inside
// the top-p nucleus, grey for the tail, gold for the drawn token) with the step's nucleus,
// exclusions, entropy and settings; below, the strip of every token of the last answer,
// tinted by the probability the model gave it. Clicking a candidate asks to regenerate from
// that step with that token (onBranch); arrow keys step through the strip.

import { el, replaceChildren, throttleToFrame } from './dom.js';

/** Token text with its whitespace made visible: "␣the", "⏎", "⇥". */
export function visibleToken(piece) {
  if (piece === '') return '∅';
  return piece.replace(/ /g, '␣').replace(/\n/g, '⏎').replace(/\r/g, '␍').replace(/\t/g, '⇥');
}

function percent(p) {
  if (!(p > 0)) return '0%';
  if (p >= 0.995) return '100%';
  if (p >= 0.1) return `${(p * 100).toFixed(0)}%`;
  if (p >= 0.001) return `${(p * 100).toFixed(1)}%`;
  return '<0.1%';
}

function describeSettings(settings) {
  if (!settings) return '';
  if (!(settings.temperature > 0)) return 'greedy (temperature 0)';
  const parts = [`temp ${settings.temperature}`];
  parts.push(settings.top_k > 0 ? `top-k ${settings.top_k}` : 'top-k off');
  parts.push(settings.top_p < 1 ? `top-p ${settings.top_p}` : 'top-p off');
  parts.push(settings.min_p > 0 ? `min-p ${settings.min_p}` : 'min-p off');
  if (settings.repeat_penalty !== 1) parts.push(`repeat ×${settings.repeat_penalty}`);
  return parts.join(' · ');
}

/**
 * ui: {root, empty, body, facts, bars, strip, label}; onBranch(stepIndex, tokenId, piece).
 * Steps are the worker's token events: {index, token, piece, forced, trace: {candidates,
 * pieces, chosen, chosen_probability, nucleus_size, nucleus_mass, excluded, entropy_bits}}.
 */
/** A bar's token, its probability as a fill (against the best one's) and as a number. */
function barParts(piece, probability, best) {
  return [
    el('span', { className: 'viz-token mono' }, visibleToken(piece)),
    el(
      'span',
      { className: 'viz-track' },
      el('span', {
        className: 'viz-fill',
        style: `width: ${Math.max(0.5, Math.min(100, (100 * probability) / best))}%`,
      }),
    ),
    el('span', { className: 'viz-prob num' }, percent(probability)),
  ];
}

export function createVisualizer(ui, { onBranch }) {
  let steps = [];
  let settings = null;
  let selected = null; // null: follow the newest step
  let branchingEnabled = true;

  const renderSoon = throttleToFrame(() => render());

  function current() {
    if (steps.length === 0) return null;
    const index = selected ?? steps.length - 1;
    return steps[Math.min(index, steps.length - 1)] ?? null;
  }

  function renderFacts(step) {
    const { trace } = step;
    const facts = [
      [
        'Drawn',
        `${visibleToken(step.piece)}  (${percent(trace.chosen_probability)}${step.forced ? ', forced by you' : ''})`,
      ],
      [
        'Nucleus',
        `${trace.nucleus_size.toLocaleString('en-US')} token${trace.nucleus_size === 1 ? '' : 's'}, ${percent(trace.nucleus_mass)} of the mass`,
      ],
      ['Excluded', `${trace.excluded.toLocaleString('en-US')} vocabulary entries`],
      ['Entropy', `${trace.entropy_bits.toFixed(2)} bits`],
      ['Settings', describeSettings(settings)],
    ];
    if (trace.grammar) {
      const { allowed, forbidden_mass: mass } = trace.grammar;
      facts.splice(3, 0, [
        'Grammar',
        `allowed ${allowed.toLocaleString('en-US')} token${allowed === 1 ? '' : 's'}; removed ${percent(mass)} of what the model wanted`,
      ]);
    }
    replaceChildren(
      ui.facts,
      facts.map(([term, value]) =>
        el('div', { className: 'viz-fact' }, el('dt', {}, term), el('dd', {}, value)),
      ),
    );
  }

  function renderBars(step) {
    const { trace } = step;
    const best = Math.max(...trace.candidates.map((c) => c.probability), 1e-9);
    const rows = trace.candidates.map((candidate, rank) => {
      const piece = trace.pieces?.[rank] ?? String(candidate.id);
      const chosen = candidate.id === trace.chosen;
      const kind = chosen ? 'chosen' : candidate.in_nucleus ? 'nucleus' : 'tail';
      const title =
        `id ${candidate.id} · logit ${candidate.logit.toFixed(3)} · p ${(candidate.probability * 100).toFixed(2)}%` +
        ` · chance to be drawn ${(candidate.sample_probability * 100).toFixed(2)}%` +
        (branchingEnabled && !chosen ? ' · click to regenerate from here with this token' : '');
      return el(
        'li',
        { className: `viz-bar ${kind}`, dataset: { id: String(candidate.id), kind } },
        el(
          'button',
          {
            type: 'button',
            className: 'viz-bar-button',
            title,
            disabled: !branchingEnabled || chosen ? true : undefined,
            onclick: () => onBranch(step.index, candidate.id, piece),
          },
          ...barParts(piece, candidate.probability, best),
        ),
      );
    });
    if (trace.chosen_rank === null || trace.chosen_rank === undefined) {
      rows.push(
        el(
          'li',
          { className: 'viz-bar chosen outside', dataset: { id: String(trace.chosen), kind: 'chosen' } },
          el(
            'span',
            { className: 'viz-note muted small' },
            `drawn: ${visibleToken(step.piece)} (${percent(trace.chosen_probability)}), ranked below the top ${trace.candidates.length}`,
          ),
        ),
      );
    }
    // The model's best tokens that the answer's grammar removed before sampling: shown apart,
    // struck through, never clickable (a branch to one would be refused).
    (trace.grammar?.forbidden ?? []).forEach((candidate, rank) => {
      const piece = trace.forbidden_pieces?.[rank] ?? String(candidate.id);
      const title = `id ${candidate.id} · logit ${candidate.logit.toFixed(3)} · the model gave it ${(candidate.probability * 100).toFixed(2)}% · removed by the grammar`;
      rows.push(
        el(
          'li',
          { className: 'viz-bar forbidden', dataset: { id: String(candidate.id), kind: 'forbidden' }, title },
          ...barParts(piece, candidate.probability, best),
        ),
      );
    });
    replaceChildren(ui.bars, rows);
  }

  function tint(probability) {
    // Confident tokens stay pale; unlikely draws glow: what surprised the model stands out.
    const surprise = 1 - Math.min(1, Math.max(0, probability));
    return `--surprise: ${surprise.toFixed(3)}`;
  }

  function chipFor(step) {
    return el(
      'span',
      {
        className: `viz-chip${step.forced ? ' forced' : ''}`,
        role: 'option',
        'aria-selected': 'false',
        dataset: { index: String(step.index), token: String(step.token) },
        style: tint(step.trace?.chosen_probability ?? 1),
        title: `step ${step.index + 1}: ${percent(step.trace?.chosen_probability ?? 1)}`,
      },
      visibleToken(step.piece),
    );
  }

  /**
   * Keeps one chip per step, rebuilding only chips whose step changed (new tokens, or a
   * branch): hovering must not replace the element under the pointer.
   */
  function renderStrip(active) {
    const chips = ui.strip.children;
    while (chips.length > steps.length) chips[chips.length - 1].remove();
    steps.forEach((step, i) => {
      const chip = chips[i];
      if (chip && chipSteps.get(chip) === step) return;
      const fresh = chipFor(step);
      chipSteps.set(fresh, step);
      if (chip) chip.replaceWith(fresh);
      else ui.strip.append(fresh);
    });
    for (const chip of chips) {
      const selectedNow = chipSteps.get(chip) === active;
      if (chip.classList.contains('selected') !== selectedNow) {
        chip.classList.toggle('selected', selectedNow);
        chip.setAttribute('aria-selected', String(selectedNow));
        if (selectedNow) chip.scrollIntoView({ block: 'nearest', inline: 'nearest' });
      }
    }
  }

  const chipSteps = new WeakMap();

  function render() {
    const step = current();
    ui.empty.hidden = Boolean(step);
    ui.body.hidden = !step;
    ui.root.dataset.steps = String(steps.length);
    // A new answer's strip starts empty: chips of the last one must not linger (hidden) until
    // its first token arrives, or never if it is stopped before one.
    if (!step) replaceChildren(ui.strip);
    if (!step?.trace) {
      ui.label.textContent = '';
      return;
    }
    ui.root.dataset.selected = String(step.index);
    ui.label.textContent = `step ${step.index + 1} of ${steps.length}${selected === null ? ' · live' : ''}`;
    renderFacts(step);
    renderBars(step);
    renderStrip(step);
  }

  function select(index) {
    if (steps.length === 0) return;
    const next = Math.max(0, Math.min(steps.length - 1, index));
    if (next === selected) return;
    selected = next;
    render();
  }

  ui.strip.addEventListener('click', (event) => {
    const chip = event.target.closest('.viz-chip');
    if (chip) select(Number(chip.dataset.index));
  });
  ui.strip.addEventListener('mouseover', (event) => {
    const chip = event.target.closest('.viz-chip');
    if (chip && event.buttons === 0) select(Number(chip.dataset.index));
  });
  ui.strip.addEventListener('keydown', (event) => {
    const at = selected ?? steps.length - 1;
    const moves = { ArrowLeft: at - 1, ArrowRight: at + 1, Home: 0, End: steps.length - 1 };
    if (event.key in moves) {
      event.preventDefault();
      select(moves[event.key]);
    } else if (event.key === 'Escape') {
      selected = null; // Back to following the newest step.
      render();
    }
  });

  return {
    /** A new answer starts: forget the old steps, follow live. */
    reset(newSettings) {
      steps = [];
      settings = newSettings ?? settings;
      selected = null;
      render();
    },
    /** Drops steps from `index` on (a branch regenerates them). */
    truncate(index) {
      steps = steps.slice(0, index);
      if (selected !== null && selected >= index) selected = null;
      render();
    },
    add(step) {
      steps[step.index] = step;
      renderSoon();
    },
    /** Draws what is pending now rather than at the next frame (an answer has finished). */
    flush() {
      render();
    },
    setBranching(enabled) {
      branchingEnabled = enabled;
      renderSoon();
    },
    select,
    get selected() {
      return selected;
    },
  };
}
