// The episode player of an expcli report: no dependency, no network; data from #player-data.
(function () {
  "use strict";
  const source = document.getElementById("player-data");
  const tabs = document.getElementById("episode-tabs");
  if (!source || !tabs) return;
  const data = JSON.parse(source.textContent);
  if (!data.episodes.length) return;
  const scrubber = document.getElementById("scrubber");
  const playButton = document.getElementById("play");
  const label = document.getElementById("step-label");
  const readout = document.getElementById("readout");
  const images = Array.from(document.querySelectorAll("img.frame"));
  const strips = Array.from(document.querySelectorAll(".strip"));
  let current = -1;
  let timer = null;

  // The index of the last of sorted numbers at or before value (0 when none is).
  function atOrBefore(sorted, value) {
    let low = 0, high = sorted.length - 1, found = 0;
    while (low <= high) {
      const middle = (low + high) >> 1;
      if (sorted[middle] <= value) { found = middle; low = middle + 1; } else { high = middle - 1; }
    }
    return found;
  }

  function number(value) {
    if (value === null || value === undefined) return "–";
    if (Number.isInteger(value)) return String(value);
    return Number(value).toPrecision(4).replace(/\.?0+$/, "");
  }

  function show(step) {
    const episode = data.episodes[current];
    step = Math.max(0, Math.min(episode.length - 1, step));
    scrubber.value = String(step);
    label.textContent = "step " + step + " of 0–" + (episode.length - 1);
    for (const image of images) {
      const frames = episode.frames[image.dataset.leaf];
      if (!frames || !frames.steps.length) { image.removeAttribute("src"); continue; }
      const i = atOrBefore(frames.steps, step);
      image.src = frames.images[i];
      image.dataset.index = String(i);
      image.dataset.step = String(frames.steps[i]);
      image.dataset.row = String(frames.rows[i]);
      image.dataset.env = String(episode.env);
    }
    const parts = [];
    if (episode.steps.length) {
      const k = atOrBefore(episode.steps, step);
      const shown = episode.steps[k];
      const next = k + 1 < episode.steps.length ? episode.steps[k + 1] : episode.length;
      if (episode.rewards) {
        const span = next - shown > 1 ? " (steps " + shown + "–" + (next - 1) + ")" : "";
        parts.push("reward" + span + " " + number(episode.rewards[k]));
      }
      for (const [name, values] of Object.entries(episode.series)) {
        const row = values[k];
        parts.push(name + " " + (row.length === 1 ? number(row[0]) : "[" + row.map(number).join(", ") + "]"));
      }
      for (const [name, texts] of Object.entries(episode.texts)) parts.push(name + " “" + texts[k] + "”");
    }
    readout.textContent = parts.join(" · ");
    const strip = strips.find((s) => s.dataset.episode === String(current));
    if (strip && episode.cursor) {
      const c = episode.cursor;
      const at = c.last > 0 ? Math.min(step, c.last) / c.last : 0;
      const cursor = strip.querySelector(".cursor");
      cursor.style.left = (100 * (c.left + (c.right - c.left) * at)) + "%";
      cursor.style.top = (100 * c.top) + "%";
      cursor.style.height = (100 * (c.bottom - c.top)) + "%";
    }
  }

  function stride(episode) {
    for (const frames of Object.values(episode.frames)) if (frames.steps.length) return frames.stride;
    return Math.max(1, Math.ceil(episode.length / 300));
  }

  function stop() {
    if (timer !== null) clearInterval(timer);
    timer = null;
    playButton.textContent = "▶ play";
  }

  function play() {
    const episode = data.episodes[current];
    if (Number(scrubber.value) >= episode.length - 1) show(0);
    playButton.textContent = "❚❚ pause";
    timer = setInterval(function () {
      const next = Number(scrubber.value) + stride(episode);
      if (next > episode.length - 1) { stop(); return; }
      show(next);
    }, 1000 / 15);
  }

  function select(index) {
    stop();
    current = index;
    const episode = data.episodes[index];
    for (const tab of tabs.querySelectorAll("button")) {
      tab.setAttribute("aria-selected", tab.dataset.episode === String(index) ? "true" : "false");
    }
    for (const strip of strips) strip.hidden = strip.dataset.episode !== String(index);
    scrubber.max = String(Math.max(0, episode.length - 1));
    document.body.dataset.episode = String(index);
    show(0);
  }

  tabs.addEventListener("click", function (event) {
    const tab = event.target.closest("button[data-episode]");
    if (tab) select(Number(tab.dataset.episode));
  });
  scrubber.addEventListener("input", function () { stop(); show(Number(scrubber.value)); });
  playButton.addEventListener("click", function () { if (timer === null) play(); else stop(); });
  document.addEventListener("keydown", function (event) {
    if (event.target instanceof HTMLInputElement) return;  // the scrubber moves itself
    if (event.key === "ArrowRight" || event.key === "ArrowLeft") {
      stop();
      const delta = (event.key === "ArrowRight" ? 1 : -1) * stride(data.episodes[current]);
      show(Number(scrubber.value) + delta);
      event.preventDefault();
    }
  });
  select(0);
})();
