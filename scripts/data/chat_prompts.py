"""Seeded, templated user requests for self-distilling a chat drafter (the real-model tier).

MT-bench is the evaluation set, so none of its text is used here: these requests only cover the
same eight kinds of work (writing, roleplay, reasoning, math, coding, extraction, STEM,
humanities), built from word lists and from CPython's `pydoc_data` prose (PSF licence).
"""

from __future__ import annotations

import random

SUBJECTS = [
    "a rainy afternoon",
    "the first day of school",
    "a lighthouse keeper",
    "an old bicycle",
    "a city at night",
    "\na lost dog finding its way home",
    "a small bakery",
    "the ocean",
    "a mountain village",
    "friendship",
    "a robot learning to paint",
    "\nautumn leaves",
    "a train journey",
    "a garden in spring",
    "the moon landing",
    "a chess tournament",
    "a forgotten letter",
    "\na snowstorm",
    "a street musician",
    "a new job",
    "moving to another country",
    "a family dinner",
    "a library",
    "a desert road",
    "\na summer festival",
    "an astronaut",
    "a thunderstorm",
    "learning to swim",
    "a haunted house",
    "a coffee shop",
    "a river",
    "\na grandmother's recipe",
    "a marathon",
    "a volcano",
    "a quiet forest",
    "a museum at midnight",
    "a birthday surprise",
    "\nan island",
    "the internet",
    "a farmer's market",
    "a piano",
    "time travel",
    "a broken phone",
    "a soccer match",
    "a kite",
    "\na pirate ship",
    "a space station",
    "a detective",
    "a wedding",
    "a bookstore",
    "electric cars",
    "recycling",
    "a hiking trip",
]

FORMS = [
    "a short poem",
    "a haiku",
    "a short story",
    "a blog post",
    "a persuasive paragraph",
    "a product description",
    "a thank-you email",
    "a diary entry",
    "a short speech",
    "a limerick",
    "a news headline and summary",
    "a restaurant review",
    "a letter to a friend",
    "a tweet",
    "an advertisement",
    "a song chorus",
]

PERSONAS = [
    "a pirate captain",
    "a medieval knight",
    "a famous chef",
    "a travel guide in Paris",
    "a detective",
    "a personal fitness coach",
    "a kind teacher",
    "a tech support agent",
    "a wise old wizard",
    "a news reporter",
    "a museum guide",
    "a sports commentator",
    "a ship's doctor",
    "a startup founder",
    "a gardener",
    "a flight attendant",
    "a librarian",
    "an astronaut on Mars",
    "a career counsellor",
    "a game show host",
]

ASKS = [
    "Introduce yourself.",
    "Describe your typical day.",
    "Give me some advice for tomorrow.",
    "Tell me about your biggest challenge.",
    "What should I know before I start?",
    "Explain what you do to a ten-year-old.",
    "Answer my question: why does this matter?",
    "Welcome me and tell me what to expect.",
    "Tell me a story from your work.",
]

CONCEPTS = [
    "photosynthesis",
    "gravity",
    "black holes",
    "the water cycle",
    "DNA replication",
    "climate change",
    "vaccines",
    "\nelectricity",
    "magnetism",
    "plate tectonics",
    "the greenhouse effect",
    "evolution by natural selection",
    "the immune system",
    "\nnuclear fusion",
    "quantum computing",
    "machine learning",
    "blockchain",
    "the speed of light",
    "entropy",
    "the periodic table",
    "\nchemical bonds",
    "how airplanes fly",
    "how batteries work",
    "the human heart",
    "the Pythagorean theorem",
    "prime numbers",
    "\nprobability",
    "supply and demand",
    "inflation",
    "compound interest",
    "neural networks",
    "the big bang",
    "tides",
    "rainbows",
    "\nsound waves",
    "volcanoes",
    "earthquakes",
    "antibiotics",
    "renewable energy",
    "semiconductors",
    "the internet protocol",
    "\nencryption",
    "sorting algorithms",
    "recursion",
    "databases",
    "operating systems",
    "cloud computing",
    "solar panels",
]

EVENTS = [
    "the French Revolution",
    "the fall of the Roman Empire",
    "the Industrial Revolution",
    "the Renaissance",
    "\nthe invention of the printing press",
    "the Cold War",
    "the American Civil War",
    "the first World War",
    "the Silk Road",
    "\nthe Age of Exploration",
    "the abolition of slavery",
    "the women's suffrage movement",
    "the moon landing",
    "\nthe collapse of the Soviet Union",
    "the rise of social media",
    "ancient Egyptian civilisation",
    "the Meiji Restoration",
    "\nthe Reformation",
    "the Great Depression",
    "the founding of the United Nations",
]

PEOPLE = [
    "Shakespeare",
    "Leonardo da Vinci",
    "Marie Curie",
    "Confucius",
    "Isaac Newton",
    "Mahatma Gandhi",
    "Ada Lovelace",
    "Aristotle",
    "Charles Darwin",
    "Frida Kahlo",
    "Beethoven",
    "Nelson Mandela",
    "Albert Einstein",
    "Jane Austen",
    "Socrates",
    "Martin Luther King Jr.",
]

CODE_TASKS = [
    "reverses a string",
    "checks whether a number is prime",
    "returns the n-th Fibonacci number",
    "\ncounts the vowels in a sentence",
    "merges two sorted lists",
    "finds the largest element in a list",
    "\nremoves duplicates from a list while keeping order",
    "checks whether a string is a palindrome",
    "\ncomputes the factorial of a number",
    "converts Celsius to Fahrenheit",
    "sorts a list of dictionaries by a key",
    "\nreads a text file and counts the words",
    "computes the greatest common divisor of two numbers",
    "\nflattens a nested list",
    "finds the second smallest number in a list",
    "checks whether two strings are anagrams",
    "\nimplements binary search",
    "returns the transpose of a matrix",
    "validates an email address with a regular expression",
    "\ncomputes the average of a list of numbers",
    "groups words by their first letter",
    "implements a stack class",
    "\nfinds the longest common prefix of a list of strings",
    "counts the frequency of each character in a string",
    "\ngenerates all subsets of a set",
]

LANGS = ["Python", "Python", "Python", "JavaScript", "C", "Java", "Rust", "Go"]

NAMES = ["Alice", "Bob", "Carlos", "Dana", "Emma", "Farid", "Grace", "Hiro", "Ines", "Jamal", "Kim", "Lena"]
THINGS = ["apples", "books", "marbles", "coins", "stickers", "pencils", "cookies", "cards"]

TIPS = [
    "staying focused while studying",
    "saving money",
    "sleeping better",
    "learning a new language",
    "starting to run",
    "cooking healthy meals",
    "giving a good presentation",
    "writing a good resume",
    "keeping a plant alive",
    "reducing stress",
    "making friends in a new city",
    "managing time at work",
    "planning a trip on a budget",
    "learning to code",
    "taking better photos",
]


def _writing(r: random.Random, passages: list[str]) -> str:
    form, subject = r.choice(FORMS), r.choice(SUBJECTS).strip()
    return r.choice(
        [
            f"Write {form} about {subject}.",
            f"Compose {form} about {subject}.",
            f"Can you write {form} about {subject}?",
            f"Write {form} about {subject}. Keep it under 150 words.",
        ]
    )


def _roleplay(r: random.Random, passages: list[str]) -> str:
    return f"Pretend you are {r.choice(PERSONAS)}. {r.choice(ASKS)}"


def _reasoning(r: random.Random, passages: list[str]) -> str:
    a, b, c = r.sample(NAMES, 3)
    n, k, thing = r.randint(5, 40), r.randint(1, 4), r.choice(THINGS)
    return r.choice(
        [
            f"{a} has {n} {thing}. {a} gives {k} to {b} and twice as many to {c}. How many {thing} does {a} have left? "
            "Explain your reasoning.",
            f"{a} is taller than {b}, and {b} is taller than {c}. Who is the shortest? Explain step by step.",
            f"If it takes {k + 1} workers {n} hours to build a wall, how long would it take {2 * (k + 1)} workers? "
            "Think step by step.",
            f"{a} is older than {b} but younger than {c}. Is {c} older than {b}? Explain.",
            f"A train leaves at {r.randint(1, 11)} o'clock and travels for {k} hours and {n} minutes. "
            "When does it arrive?",
        ]
    )


def _math(r: random.Random, passages: list[str]) -> str:
    a, b, c = r.randint(2, 99), r.randint(2, 99), r.randint(2, 500)
    return r.choice(
        [
            f"What is {a} times {b}?",
            f"Solve for x: {a}x + {b} = {c}.",
            f"What is the derivative of {a}x^3 + {b}x?",
            f"What is {c} divided by {a}, as a decimal?",
            f"Find the area of a triangle with base {a} and height {b}.",
            f"What is {a}% of {c}?",
            f"Is {c} a prime number? Explain.",
            f"A rectangle is {a} cm long and {b} cm wide. What are its area and perimeter?",
            f"Compute the sum of the integers from 1 to {c}.",
        ]
    )


def _coding(r: random.Random, passages: list[str]) -> str:
    task, lang = r.choice(CODE_TASKS).strip(), r.choice(LANGS)
    return r.choice(
        [
            f"Write a {lang} function that {task}.",
            f"Write a {lang} function that {task}, and explain how it works.",
            f"How would you write a program that {task}? Use {lang}.",
        ]
    )


def _extraction(r: random.Random, passages: list[str]) -> str:
    text = r.choice(passages)
    return r.choice(
        [
            f"Summarize the following text in two sentences:\n\n{text}",
            f"List the key terms mentioned in this text:\n\n{text}",
            f"Extract the main idea of the following paragraph:\n\n{text}",
            f"Rewrite this paragraph in simpler words:\n\n{text}",
        ]
    )


def _stem(r: random.Random, passages: list[str]) -> str:
    concept = r.choice(CONCEPTS).strip()
    return r.choice(
        [
            f"Explain {concept} in simple terms.",
            f"How does {concept} work?",
            f"What is {concept}, and why is it important?",
            f"Explain {concept} to a high school student.",
            f"Give three facts about {concept}.",
        ]
    )


def _humanities(r: random.Random, passages: list[str]) -> str:
    return r.choice(
        [
            f"What were the main causes of {r.choice(EVENTS).strip()}?",
            f"Describe the impact of {r.choice(EVENTS).strip()} on everyday life.",
            f"Why is {r.choice(PEOPLE)} still important today?",
            f"Compare {r.choice(PEOPLE)} and {r.choice(PEOPLE)}.",
            f"Give me some tips for {r.choice(TIPS)}.",
        ]
    )


KINDS = [_writing, _roleplay, _reasoning, _math, _coding, _extraction, _stem, _humanities]


def chat_prompts(n: int, seed: int = 0) -> list[str]:
    """n distinct user requests, the eight kinds in turn."""
    from pydoc_data.topics import topics

    paragraphs = [p.strip() for t in topics.values() for p in t.split("\n\n") if 200 < len(p.strip()) < 700]
    r = random.Random(seed)
    seen: set[str] = set()
    out: list[str] = []
    for i in range(n * 20):
        if len(out) == n:
            break
        p = KINDS[i % len(KINDS)](r, paragraphs)
        if p not in seen:
            seen.add(p)
            out.append(p)
    return out
