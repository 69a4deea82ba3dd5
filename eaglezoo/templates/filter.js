<script>
const box = document.getElementById("filter");
box.addEventListener("input", () => {
  const words = box.value.toLowerCase().split(/\s+/).filter(Boolean);
  for (const row of document.querySelectorAll("#entries tbody tr")) {
    const text = row.textContent.toLowerCase();
    row.hidden = !words.every(w => text.includes(w));
  }
});
</script>
